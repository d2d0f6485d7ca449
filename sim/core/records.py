"""What a tick hands to the store: the tick's record and its agents' steps (one by one or in columns).

Plain data built by the tick (`sim.tick`) and written by the store (`sim.store`), so neither of
them imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from sim.core.contracts import Event


@dataclass(slots=True)
class AgentStepRecord:
    """One agent's tick: its decisions by phase, payoff, reward, fallback flag, memory snapshot."""

    agent_id: int
    action: dict[str, Any]
    payoff: float
    reward: float
    fallback: bool
    backend: str
    reason: Optional[str]
    memory: Optional[dict[str, Any]]  # None: unchanged since the last stored snapshot
    components: Optional[dict[str, float]] = None  # the reward vector (sim.reward.components); None before contract 7

    def row(self, prefix: tuple, encode: Callable[[Any], str]) -> tuple:
        """The store's row: `prefix + (agent_id, backend, action JSON, payoff, reward, fallback, reason,
        memory JSON or None, components JSON or None)`."""
        return prefix + (self.agent_id, self.backend, encode(self.action), self.payoff, self.reward, self.fallback,
                         self.reason, None if self.memory is None else encode(self.memory),
                         None if self.components is None else encode(self.components))


_PLAIN = frozenset({str, int, float, bool, type(None)})  # values equal only when their JSON is (but 0.0 / -0.0)


class StepColumns(Sequence[AgentStepRecord]):
    """A tick's agent steps in columns, by agent id; indexing or iterating gives the AgentStepRecords.

    Built once per tick for every agent, so it holds columns (ids, backends, payoffs, rewards) and
    each phase's `agent id -> value` map rather than one object per agent: at 10,000 agents that
    is most of the cost of recording a tick. `reasons` and `memories` hold only the agents that
    had a fallback or whose memory changed.
    """

    __slots__ = ("agent_ids", "backends", "payoffs", "rewards", "actions", "reasons", "memories", "components")

    def __init__(self, agent_ids: Sequence[int], backends: Sequence[str], payoffs: Sequence[float],
                 rewards: Sequence[float], actions: Sequence[tuple[str, Mapping[int, Any]]],
                 reasons: Mapping[int, str], memories: Mapping[int, dict[str, Any]],
                 components: Optional[Sequence[Optional[dict[str, float]]]] = None) -> None:
        self.agent_ids, self.backends, self.payoffs, self.rewards = agent_ids, backends, payoffs, rewards
        self.actions, self.reasons, self.memories = actions, reasons, memories
        self.components = components  # each agent's reward vector, in agent order (None: not recorded)

    def __len__(self) -> int:
        return len(self.agent_ids)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        aid = self.agent_ids[i]
        reason = self.reasons.get(aid)
        return AgentStepRecord(aid, {p: m[aid] for p, m in self.actions if aid in m}, self.payoffs[i], self.rewards[i],
                               reason is not None, self.backends[i], reason, self.memories.get(aid),
                               None if self.components is None else self.components[i])

    def __iter__(self) -> Iterator[AgentStepRecord]:
        return (self[i] for i in range(len(self)))

    def rows(self, prefix: tuple, encode: Callable[[Any], str]) -> list[tuple]:
        """One row per agent for the store: `prefix + (agent_id, backend, action JSON, payoff, reward,
        fallback, reason, memory JSON or None, components JSON or None)` (as `AgentStepRecord.row`); a
        one-phase tick encodes each distinct action and each distinct reward vector once."""
        if len(self.actions) != 1:
            return [st.row(prefix, encode) for st in self]
        vectors = self._encoded_components(encode)
        phase, chosen = self.actions[0]
        reasons, memories = self.reasons, self.memories
        encoded: dict[Any, str] = {}
        empty = encode({})
        rows = []
        for aid, backend, payoff, reward, vec in zip(self.agent_ids, self.backends, self.payoffs, self.rewards, vectors):
            if aid in chosen:
                v = chosen[aid]
                kind = type(v)
                if kind in _PLAIN:  # one encoding per value (and 0.0 / -0.0, equal keys, apart)
                    key = (kind, v, str(v)) if kind is float and v == 0.0 else (kind, v)
                    action = encoded.get(key)
                    if action is None:
                        action = encoded[key] = encode({phase: v})
                else:
                    action = encode({phase: v})
            else:
                action = empty
            reason = reasons.get(aid)
            memory = memories.get(aid)
            rows.append(prefix + (aid, backend, action, payoff, reward, reason is not None, reason,
                                  None if memory is None else encode(memory), vec))
        return rows

    def _encoded_components(self, encode: Callable[[Any], str]) -> list[Optional[str]]:
        """Each agent's reward vector as JSON (None where none is recorded), each distinct vector encoded once."""
        if self.components is None:
            return [None] * len(self.agent_ids)
        done: dict[tuple, str] = {}
        out: list[Optional[str]] = []
        for vec in self.components:
            if vec is None:
                out.append(None)
                continue
            key = tuple((k, v, str(v)) for k, v in vec.items())  # (str: -0.0 and 0.0 apart)
            text = done.get(key)
            if text is None:
                text = done[key] = encode(vec)
            out.append(text)
        return out


@dataclass
class TickRecord:
    """Everything the store commits for one tick, in one transaction."""

    tick: int
    metrics: dict[str, float]
    state: dict[str, Any]
    steps: Sequence[AgentStepRecord]
    events: list[Event]
    status: str = "running"
    extra: dict[str, Any] = field(default_factory=dict)
