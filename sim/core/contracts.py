"""What passes between the world and the deciders: requests, decisions (one by one or in columns), events.

Plain data, no Mesa, no database, no LLM: a scenario produces `DecisionRequest`s (or a
`RequestBatch` of them), a backend answers with `Decision`s (or `DecisionColumns`), and the world
emits `Event`s. What makes a run reproducible is in `sim.core.spec`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Optional

import numpy as np

from sim.core.spaces import Space

_UNCHECKED = object()  # no default checked yet (DecisionRequest)


@dataclass(slots=True)
class DecisionRequest:
    """One agent's pending decision: who, in what phase, what it sees, what it may do.

    Read-only by convention (never mutated after construction). Not `frozen=True`: a frozen
    dataclass costs ~3 µs more per construction, and one is built per agent per phase.

    `observation` is plain data for scripted strategies; `context` is the same view as
    text for LLM prompts: the part every agent shares, while `own_context` (optional) is
    this agent's own part (identity, own results), rendered after the persona so that
    prompts share their beginning; `default` is what a fallback uses (must lie in `space`).
    `reason_tokens` > 0 asks an LLM to reason (at most that many tokens) before its answer, which
    follows "Answer:" (a paper protocol's step-by-step reasoning); scripted strategies ignore it.
    A paper protocol may say things in its own words where the platform has its own: `system` is the
    request's system message in place of the prompt template's (None: the template's; "": no system
    message at all, as a paper that sends a single user turn), and `answer_prompt` its instruction for
    answering in place of the platform's ("Answer with ..." or, with reasoning, "Think it through step by
    step ..."; "": the platform's). Scripted strategies ignore both.
    `render`: set on an LLM agent's request built without its prompt text, for a backend that reads only some
    prompts (archetypes: one a bucket, `SocietyModel.deferred`): the function that builds the request with its text
    (`rendered`). None: the text is here.
    """

    agent_id: int
    tick: int
    phase: str
    space: Space
    default: Any
    backend: str = "scripted"
    strategy: Optional[str] = None
    observation: dict[str, Any] = field(default_factory=dict)
    context: str = ""
    question: str = ""
    persona: str = ""
    memory: str = ""
    feedback: str = ""
    seed: int = 0
    own_context: str = ""
    reason_tokens: int = 0
    system: Optional[str] = None
    answer_prompt: str = ""
    render: Optional[Callable[[], "DecisionRequest"]] = None

    def __post_init__(self) -> None:
        space, default = self.space, self.default
        seen = getattr(space, "_checked_default", _UNCHECKED)
        if type(seen) is not type(default) or seen != default:  # a space shared by many requests: check its default once
            space.validate(default)
            object.__setattr__(space, "_checked_default", default)

    def rendered(self) -> "DecisionRequest":
        """This request with its prompt text (itself, unless it was built without it: `render`)."""
        return self if self.render is None else self.render()


@dataclass(slots=True)
class Decision:
    """A backend's answer to one request; `fallback` marks a replaced answer, never hidden (read-only by convention)."""

    agent_id: int
    phase: str
    value: Any
    backend: str
    fallback: bool = False
    reason: Optional[str] = None
    attempts: int = 1
    cached: bool = False
    raw: Optional[str] = None


class RequestBatch(Sequence[DecisionRequest]):
    """A phase's requests that differ only in who decides: a list of DecisionRequests, in columns.

    Every request shares the tick, phase, space, default, observation (read-only), context and
    question; each agent has its id, strategy, persona and seed. A scenario returns one from
    `SocietyModel.observe_batch` when that holds (e.g. every scripted fisher at harvest sees the
    same lake), so that 10,000 decisions cost one request, not 10,000. Indexing or iterating it
    gives the very DecisionRequests the one-by-one `observe` would have built (each with its own
    copy of the observation), so any backend can answer it; a backend with `decide_columns`
    answers it whole.

    Requests that also differ in what each agent sees (the donor game's donors: each its own resources and
    recipient) travel with `columns`, each observed field that differs as an array over the agents (what a
    columnar strategy reads, `view`), and `build`, which builds request i exactly as `observe` would (its own
    observation and question): indexing the batch then gives `build(i)`.
    """

    __slots__ = ("tick", "phase", "space", "default", "observation", "agent_ids", "strategies", "personas",
                 "seeds", "backend", "context", "question", "columns", "build")

    def __init__(self, *, tick: int, phase: str, space: Space, default: Any, observation: dict[str, Any],
                 agent_ids: Sequence[int], strategies: Sequence[Optional[str]], personas: Sequence[str],
                 seeds: Sequence[int], backend: str = "scripted", context: str = "", question: str = "",
                 columns: Optional[Mapping[str, np.ndarray]] = None,
                 build: Optional[Callable[[int], DecisionRequest]] = None) -> None:
        if not len(agent_ids) == len(strategies) == len(personas) == len(seeds):
            raise ValueError("a RequestBatch needs one id, strategy, persona and seed per agent")
        if (columns is None) != (build is None):
            raise ValueError("a RequestBatch with its agents' own observations needs both their columns and `build`")
        if columns is not None and any(len(c) != len(agent_ids) for c in columns.values()):
            raise ValueError("a RequestBatch's observation columns need one value per agent")
        self.tick, self.phase, self.space, self.default = tick, phase, space, default
        self.observation, self.backend, self.context, self.question = observation, backend, context, question
        self.agent_ids, self.strategies, self.personas = agent_ids, strategies, personas
        self.seeds = np.asarray(seeds, dtype=np.uint64)  # (numpy: a strategy's `many` draws from them at once)
        self.columns, self.build = columns, build
        DecisionRequest(agent_id=0, tick=tick, phase=phase, space=space, default=default)  # checks the default once

    def __len__(self) -> int:
        return len(self.agent_ids)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if self.build is not None:
            return self.build(i if i >= 0 else i + len(self))
        return DecisionRequest(
            agent_id=self.agent_ids[i], tick=self.tick, phase=self.phase, space=self.space, default=self.default,
            backend=self.backend, strategy=self.strategies[i], observation=dict(self.observation), context=self.context,
            question=self.question, persona=self.personas[i], seed=int(self.seeds[i]),
        )

    def __iter__(self) -> Iterator[DecisionRequest]:
        return (self[i] for i in range(len(self)))

    def view(self, positions: Sequence[int]) -> dict[str, Any]:
        """What the agents at `positions` observe, for a columnar strategy: the shared observation, and each of the
        batch's `columns` as the array of their values (the shared observation itself where there are none)."""
        if self.columns is None:
            return self.observation
        if isinstance(positions, range) and len(positions) == len(self):
            return {**self.observation, **self.columns}
        picked = np.asarray(positions, dtype=np.intp)
        return {**self.observation, **{k: np.asarray(c)[picked] for k, c in self.columns.items()}}


class DecisionColumns(Sequence[Decision]):
    """A phase's decisions in columns: `agent_ids[i]` decided `values[i]` (the value in force, a fallback's
    default included).

    `special` holds, by position, every decision that is more than (agent, phase, value, backend):
    fallbacks, cached or retried answers, raw text. Indexing gives the Decision itself, so a
    scenario's `act` reads it as it reads a list; `columns_of` and `values_by_agent` are the fast path.
    """

    __slots__ = ("phase", "backend", "agent_ids", "values", "special")

    def __init__(self, phase: str, backend: str, agent_ids: Sequence[int], values: Sequence[Any],
                 special: Optional[Mapping[int, Decision]] = None) -> None:
        self.phase, self.backend, self.agent_ids, self.values = phase, backend, agent_ids, values
        self.special: dict[int, Decision] = dict(special or {})

    @classmethod
    def of(cls, phase: str, backend: str, decisions: Sequence[Decision]) -> "DecisionColumns":
        """Columns of a list of decisions (any decision with more than a value is kept whole)."""
        special = {i: d for i, d in enumerate(decisions)
                   if d.fallback or d.cached or d.raw is not None or d.reason is not None or d.attempts != 1
                   or d.backend != backend or d.phase != phase}
        return cls(phase, backend, [d.agent_id for d in decisions], [d.value for d in decisions], special)

    def __len__(self) -> int:
        return len(self.agent_ids)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        d = self.special.get(i if i >= 0 else i + len(self))
        return d if d is not None else Decision(self.agent_ids[i], self.phase, self.values[i], self.backend)

    def __iter__(self) -> Iterator[Decision]:
        return (self[i] for i in range(len(self)))

    def take(self, order: Sequence[int]) -> "DecisionColumns":
        """The decisions at positions `order`, in that order (a shuffle applied to every column)."""
        special = self.special
        moved = {j: special[i] for j, i in enumerate(order) if i in special} if special else None
        return DecisionColumns(self.phase, self.backend, _taken(self.agent_ids, order), _taken(self.values, order), moved)

    def fallbacks(self) -> list[Decision]:
        """The decisions replaced by their request's default, in position order."""
        return [d for _, d in sorted(self.special.items()) if d.fallback]


def _taken(values: Sequence[Any], order: Sequence[int]) -> list[Any]:
    """`[values[i] for i in order]`, picked in C (`itemgetter`)."""
    if len(order) < 2:
        return [values[i] for i in order]
    return list(itemgetter(*order)(values))


def columns_of(decisions: Sequence[Decision]) -> tuple[Sequence[int], Sequence[Any]]:
    """(agent ids, decided values) of a list of decisions, or a DecisionColumns' own columns (no copy)."""
    if isinstance(decisions, DecisionColumns):
        return decisions.agent_ids, decisions.values
    return [d.agent_id for d in decisions], [d.value for d in decisions]


def values_by_agent(decisions: Sequence[Decision]) -> dict[int, Any]:
    """agent id -> decided value, for a list of decisions or DecisionColumns."""
    return dict(zip(*columns_of(decisions)))


@dataclass(frozen=True)
class Event:
    """Something that happened in the world: a message, a sanction, a norm event, a trade."""

    kind: str
    actor: Optional[int] = None
    target: Optional[int] = None
    data: dict[str, Any] = field(default_factory=dict)
