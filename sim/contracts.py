"""The contracts every other module depends on: requests, decisions, events, run specs.

Plain frozen data, no Mesa, no database, no LLM: a scenario produces `DecisionRequest`s,
a backend answers with `Decision`s, the world emits `Event`s, and a `RunSpec` says
everything needed to reproduce a run.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from sim.spaces import Space


#: The decision contract new runs are made under: what, besides the spec's own fields, decides a run's
#: decisions (and so its LLM cache keys). A stored run replays under its own (`RunSpec.contract`):
#:   1 (runs stored before 2026-11-23): blake2b request seeds and Mersenne Twister strategy draws;
#:   2: counter-based request seeds and strategy draws (sim.rng);
#:   3: the fishery's public events (the month's catches in all, messages, proposals, vote outcomes) are one
#:      shared history in the situation every fisher reads, not a line in every fisher's own memory; and every
#:      scenario's agent memory has the config's `memory_window` and `memory_summary_chars` (under 1 and 2 an
#:      agent's memory got the defaults, 8 and 400, whatever the config said).
#:   4: the built-in LLM prompt asks for a Number in one sentence after the question ("Answer with a number from
#:      0 to 68 in steps of 1.", without 3's "Reply with the number only.") and lists the agent's memory items
#:      without the "What you remember:" header: see agents.llm.prompts.builtin_template. Scripted runs decide
#:      as under 3.
#: A later change of that kind bumps it, and keeps the old way for replays.
CONTRACT = 4


def derive_seed(seed: int, *parts: Any) -> int:
    """A 63-bit seed derived from the run seed and any labels (tick, agent, phase).

    Used so that a decision's randomness depends only on who decides when, never on
    which other requests happened to share its batch.
    """
    if (len(parts) == 3 and type(seed) is int and type(parts[0]) is int and type(parts[1]) is int
            and _SAFE_TEXT.get(parts[2]) is True):  # the hot path: (seed, tick, agent, phase)
        text = f'[{seed}, {parts[0]}, {parts[1]}, "{parts[2]}"]'
    else:
        text = _fast_json(seed, parts) or json.dumps([seed, *parts], default=str)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") >> 1


_UNCHECKED = object()
_SAFE = re.compile(r"[A-Za-z0-9_.:\- ]*\Z")
_SAFE_TEXT: dict[str, bool] = {}  # phase names and other labels repeat: test each once


def _fast_json(seed: Any, parts: tuple[Any, ...]) -> Optional[str]:
    """`json.dumps([seed, *parts])` for ints and plain strings, built directly (the hot path); None otherwise."""
    out = []
    for p in (seed, *parts):
        if type(p) is int:
            out.append(str(p))
        elif type(p) is str:
            safe = _SAFE_TEXT.get(p)
            if safe is None:
                safe = bool(_SAFE.match(p))
                if len(_SAFE_TEXT) < 10_000:
                    _SAFE_TEXT[p] = safe
            if not safe:
                return None
            out.append(f'"{p}"')
        else:
            return None
    return "[" + ", ".join(out) + "]"


@dataclass(slots=True)
class DecisionRequest:
    """One agent's pending decision: who, in what phase, what it sees, what it may do.

    Read-only by convention (never mutated after construction). Not `frozen=True`: a frozen
    dataclass costs ~3 µs more per construction, and one is built per agent per phase.

    `observation` is plain data for scripted strategies; `context` is the same view as
    text for LLM prompts: the part every agent shares, while `own_context` (optional) is
    this agent's own part (identity, own results), rendered after the persona so that
    prompts share their beginning; `default` is what a fallback uses (must lie in `space`).
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

    def __post_init__(self) -> None:
        space, default = self.space, self.default
        seen = getattr(space, "_checked_default", _UNCHECKED)
        if type(seen) is not type(default) or seen != default:  # a space shared by many requests: check its default once
            space.validate(default)
            object.__setattr__(space, "_checked_default", default)


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
    """

    __slots__ = ("tick", "phase", "space", "default", "observation", "agent_ids", "strategies", "personas",
                 "seeds", "backend", "context", "question")

    def __init__(self, *, tick: int, phase: str, space: Space, default: Any, observation: dict[str, Any],
                 agent_ids: Sequence[int], strategies: Sequence[Optional[str]], personas: Sequence[str],
                 seeds: Sequence[int], backend: str = "scripted", context: str = "", question: str = "") -> None:
        if not len(agent_ids) == len(strategies) == len(personas) == len(seeds):
            raise ValueError("a RequestBatch needs one id, strategy, persona and seed per agent")
        self.tick, self.phase, self.space, self.default = tick, phase, space, default
        self.observation, self.backend, self.context, self.question = observation, backend, context, question
        self.agent_ids, self.strategies, self.personas = agent_ids, strategies, personas
        self.seeds = np.asarray(seeds, dtype=np.uint64)  # (numpy: a strategy's `many` draws from them at once)
        DecisionRequest(agent_id=0, tick=tick, phase=phase, space=space, default=default)  # checks the default once

    def __len__(self) -> int:
        return len(self.agent_ids)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return DecisionRequest(
            agent_id=self.agent_ids[i], tick=self.tick, phase=self.phase, space=self.space, default=self.default,
            backend=self.backend, strategy=self.strategies[i], observation=dict(self.observation), context=self.context,
            question=self.question, persona=self.personas[i], seed=int(self.seeds[i]),
        )

    def __iter__(self) -> Iterator[DecisionRequest]:
        return (self[i] for i in range(len(self)))


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
        ids, values = self.agent_ids, self.values
        special = self.special
        moved = {j: special[i] for j, i in enumerate(order) if i in special} if special else None
        return DecisionColumns(self.phase, self.backend, [ids[i] for i in order], [values[i] for i in order], moved)

    def fallbacks(self) -> list[Decision]:
        """The decisions replaced by their request's default, in position order."""
        return [d for _, d in sorted(self.special.items()) if d.fallback]


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


class LLMSpec(BaseModel):
    """Which LLM backend plays the `llm` policy and how it samples."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Literal["local", "langchain"] = "local"
    model: Optional[str] = None  # local: path to a model dir or .gguf; None = embedded SmolLM2
    cls: Optional[str] = None  # langchain: "module:Class"
    args: dict[str, Any] = Field(default_factory=dict)
    temperature: float = Field(0.7, ge=0.0, le=5.0, allow_inf_nan=False)
    max_retries: int = Field(2, ge=0, le=20)
    max_concurrency: int = Field(8, ge=1, le=1024)
    timeout_s: float = Field(60.0, gt=0.0, le=3600.0, allow_inf_nan=False)
    device: Optional[str] = Field(None, pattern=r"^(cpu|cuda(:\d+)?|mps)$")
    dtype: Optional[Literal["bf16", "bfloat16", "fp16", "float16", "fp32", "float32"]] = None
    threads: Optional[int] = Field(None, ge=1, le=512)  # local, CPU: torch threads (None: picked per machine)
    batch_tokens: Optional[int] = Field(None, ge=64, le=16_777_216)  # local: tokens per forward (None: per device)
    structured: Literal["auto", "json_schema", "vllm", "llama_cpp", "none"] = "auto"  # langchain: output constraint
    # the prompt template: None = the built-in one; a name given to @register_template, or a reference
    # module:NAME / path/to/file.py:NAME to a PromptTemplate (or a function request -> chat messages)
    template: Optional[str] = Field(None, min_length=1, max_length=4096,
                                    description="prompt template: a @register_template name or module:NAME / file.py:NAME")


class RunSpec(BaseModel):
    """Everything that determines a run: scenario, validated config, seed, policy, LLM.

    Two runs with equal specs (and a warm cache) produce identical stored results.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    scenario: str
    config: dict[str, Any]
    seed: int = 0
    policy: Literal["scripted", "llm"] = "scripted"
    llm: LLMSpec = Field(default_factory=LLMSpec)
    # the decision contract the run was made under (see CONTRACT): every spec the platform builds names the
    # current one; a spec that names none (stored before versions existed, or built by hand) is version 1
    contract: Literal[1, 2, 3, 4] = 1

    def digest(self) -> str:
        """A short stable hash of the spec (a version-1 spec hashes as it did before `contract` existed)."""
        text = json.dumps(self.model_dump(mode="json", exclude={"contract"} if self.contract == 1 else None), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
