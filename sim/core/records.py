"""What a tick hands to the store: the tick's record and its agents' steps (one by one or in columns).

Plain data built by the tick (`sim.tick`) and written by the store (`sim.store`), so neither of
them imports the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Optional

import numpy as np

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
    components: Optional[dict[str, Any]] = None  # the reward vector (sim.reward.components); None before contract 7

    def row(self, prefix: tuple, encode: Callable[[Any], str]) -> tuple:
        """The store's row: `prefix + (agent_id, backend, action JSON, payoff, reward, fallback, reason,
        memory JSON or None)` (the reward vector is stored apart, a tick's in one packed column: `RewardVectors`)."""
        return prefix + (self.agent_id, self.backend, encode(self.action), self.payoff, self.reward, self.fallback,
                         self.reason, None if self.memory is None else encode(self.memory))


class RewardVectors:
    """A tick's reward vectors in columns: `columns[name][i]` is component `name` of agent `agent_ids[i]`.

    What the reward layer computes over arrays and the store packs per tick (sim.store.vectors). An
    agent's vector, as it reads (`vector`), is its non-zero components by name in column order, the
    payoff always in (0.0 where it has none).
    """

    __slots__ = ("agent_ids", "columns", "_lists")

    def __init__(self, agent_ids: Sequence[int], columns: Mapping[str, np.ndarray]) -> None:
        self.agent_ids = agent_ids
        self.columns = dict(columns)
        for name, values in self.columns.items():
            if len(values) != len(agent_ids):
                raise ValueError(f"reward component {name!r} has {len(values)} values for {len(agent_ids)} agents")
        self._lists: Optional[list[tuple[str, list[float]]]] = None

    @classmethod
    def of(cls, agent_ids: Sequence[int], vectors: Sequence[Mapping[str, float]]) -> "RewardVectors":
        """Columns of per-agent vectors (name -> value; a name an agent lacks is 0 for it), names in first-seen order."""
        names: dict[str, None] = {}
        for vec in vectors:
            names.update(dict.fromkeys(vec))
        n = len(agent_ids)
        return cls(agent_ids, {name: np.fromiter((float(v.get(name) or 0.0) for v in vectors), np.float64, n)
                               for name in names})

    def __len__(self) -> int:
        return len(self.agent_ids)

    def vector(self, i: int) -> dict[str, float]:
        """The i-th agent's vector as it reads: its non-zero components by name (the payoff always, 0.0 where it has
        none; -0.0 counts as zero)."""
        lists = self._lists
        if lists is None:
            lists = self._lists = [(name, values.tolist()) for name, values in self.columns.items()]
        out: dict[str, float] = {}
        for name, values in lists:
            v = values[i]
            if v or name == "payoff":
                out[name] = v or 0.0
        return out

    def vectors(self) -> list[dict[str, float]]:
        """Every agent's vector, in agent order."""
        return [self.vector(i) for i in range(len(self.agent_ids))]


_PLAIN = frozenset({str, int, float, bool, type(None)})  # values equal only when their JSON is (but 0.0 / -0.0)
_ABSENT = object()


class StepColumns(Sequence[AgentStepRecord]):
    """A tick's agent steps in columns, by agent id; indexing or iterating gives the AgentStepRecords.

    Built once per tick for every agent, so it holds columns (ids, backends, payoffs, rewards) and
    each phase's `agent id -> value` map rather than one object per agent: at 10,000 agents that
    is most of the cost of recording a tick. `reasons` and `memories` hold only the agents that
    had a fallback or whose memory changed; `vectors` the reward vectors, aligned with the agents.
    """

    __slots__ = ("agent_ids", "backends", "payoffs", "rewards", "actions", "reasons", "memories", "vectors")

    def __init__(self, agent_ids: Sequence[int], backends: Sequence[str], payoffs: Sequence[float],
                 rewards: Sequence[float], actions: Sequence[tuple[str, Mapping[int, Any]]],
                 reasons: Mapping[int, str], memories: Mapping[int, dict[str, Any]],
                 vectors: Optional[RewardVectors] = None) -> None:
        self.agent_ids, self.backends, self.payoffs, self.rewards = agent_ids, backends, payoffs, rewards
        self.actions, self.reasons, self.memories = actions, reasons, memories
        if vectors is not None and len(vectors) != len(agent_ids):
            raise ValueError(f"{len(vectors)} reward vectors for {len(agent_ids)} agent steps")
        self.vectors = vectors  # each agent's reward vector, in agent order (None: not recorded)

    def __len__(self) -> int:
        return len(self.agent_ids)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        aid = self.agent_ids[i]
        reason = self.reasons.get(aid)
        return AgentStepRecord(aid, {p: m[aid] for p, m in self.actions if aid in m}, self.payoffs[i], self.rewards[i],
                               reason is not None, self.backends[i], reason, self.memories.get(aid),
                               None if self.vectors is None else self.vectors.vector(i))

    def __iter__(self) -> Iterator[AgentStepRecord]:
        return (self[i] for i in range(len(self)))

    def rows(self, prefix: tuple, encode: Callable[[Any], str]) -> list[tuple]:
        """One row per agent for the store: `prefix + (agent_id, backend, action JSON, payoff, reward,
        fallback, reason, memory JSON or None)` (as `AgentStepRecord.row`).

        Built column by column and zipped (at 100,000 agents, ~5x faster than the records one by one): each
        distinct action is encoded once, of one phase or several; the reasons and memories, held only for the
        agents that have one, are looked up only when there are any."""
        ids = self.agent_ids
        n = len(ids)
        reasons: Iterable[Optional[str]] = repeat(None, n)
        fell: Iterable[bool] = repeat(False, n)
        memories: Iterable[Optional[str]] = repeat(None, n)
        if self.reasons:
            reasons = list(map(self.reasons.get, ids))
            fell = [r is not None for r in reasons]
        if self.memories:
            memories = [None if m is None else encode(m) for m in map(self.memories.get, ids)]
        return list(zip(*(repeat(p, n) for p in prefix), ids, self.backends, self._encoded_actions(encode),
                        self.payoffs, self.rewards, fell, reasons, memories))

    def _encoded_actions(self, encode: Callable[[Any], str]) -> list[str]:
        """Each agent's `{phase: value}` as JSON, in agent order; each distinct one encoded once (values of plain
        types only: they are equal only when their JSON is, but 0.0 and -0.0, told apart here)."""
        cache: dict[Any, str] = {}
        out: list[str] = []
        append = out.append
        if len(self.actions) == 1:
            phase, chosen = self.actions[0]
            empty = encode({})
            get = chosen.get
            for aid in self.agent_ids:
                v = get(aid, _ABSENT)
                if v is _ABSENT:
                    append(empty)
                    continue
                kind = type(v)
                if kind not in _PLAIN:
                    append(encode({phase: v}))
                    continue
                key = (kind, v, str(v)) if kind is float and v == 0.0 else (kind, v)
                action = cache.get(key)
                if action is None:
                    action = cache[key] = encode({phase: v})
                append(action)
            return out
        phases = self.actions
        for aid in self.agent_ids:
            action = {p: m[aid] for p, m in phases if aid in m}
            key: Optional[tuple] = ()
            for p, v in action.items():
                kind = type(v)
                if kind not in _PLAIN:
                    key = None
                    break
                key += (p, kind, v, str(v)) if kind is float and v == 0.0 else (p, kind, v)
            if key is None:
                append(encode(action))
                continue
            encoded = cache.get(key)
            if encoded is None:
                encoded = cache[key] = encode(action)
            append(encoded)
        return out


def reward_vectors(steps: Sequence[AgentStepRecord]) -> Optional[RewardVectors]:
    """The reward vectors of a tick's steps, in columns: a StepColumns' own, else those of the steps that carry one
    (None when none does)."""
    if isinstance(steps, StepColumns):
        return steps.vectors
    carried = [st for st in steps if st.components is not None]
    if not carried:
        return None
    return RewardVectors.of([st.agent_id for st in carried], [st.components for st in carried])


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
