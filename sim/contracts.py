"""The contracts every other module depends on: requests, decisions, events, run specs.

Plain frozen data, no Mesa, no database, no LLM: a scenario produces `DecisionRequest`s,
a backend answers with `Decision`s, the world emits `Event`s, and a `RunSpec` says
everything needed to reproduce a run.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from sim.spaces import Space


def derive_seed(seed: int, *parts: Any) -> int:
    """A 63-bit seed derived from the run seed and any labels (tick, agent, phase).

    Used so that a decision's randomness depends only on who decides when, never on
    which other requests happened to share its batch.
    """
    text = json.dumps([seed, *parts], default=str)
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big") >> 1


@dataclass(frozen=True)
class DecisionRequest:
    """One agent's pending decision: who, in what phase, what it sees, what it may do.

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
        self.space.validate(self.default)


@dataclass(frozen=True)
class Decision:
    """A backend's answer to one request; `fallback` marks a replaced answer, never hidden."""

    agent_id: int
    phase: str
    value: Any
    backend: str
    fallback: bool = False
    reason: Optional[str] = None
    attempts: int = 1
    cached: bool = False
    raw: Optional[str] = None


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
    temperature: float = 0.7
    max_retries: int = 2
    max_concurrency: int = 8
    timeout_s: float = 60.0
    device: Optional[str] = None
    dtype: Optional[str] = None
    threads: Optional[int] = Field(None, ge=1, le=512)  # local, CPU: torch threads (None: picked per machine)
    batch_tokens: Optional[int] = Field(None, ge=64, le=16_777_216)  # local: tokens per forward (None: per device)
    structured: Literal["auto", "json_schema", "vllm", "llama_cpp", "none"] = "auto"  # langchain: output constraint


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

    def digest(self) -> str:
        """A short stable hash of the spec."""
        text = json.dumps(self.model_dump(mode="json"), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]
