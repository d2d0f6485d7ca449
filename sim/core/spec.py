"""What makes a run reproducible: its `RunSpec` (scenario, validated config, seed, policy, LLM, contract).

Two runs with equal specs (and a warm LLM cache) store identical results; the spec is stored with
every run, so replay, resume, fork and the app rebuild the run from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from sim.core.fields import StrictNumbers
from sim.core.profiles import VERSIONS, DecisionProfile, profile


#: who decides for an agent: its scripted strategy, the LLM step by step, or a program the LLM wrote (run in the
#: sandbox; the LLM writes it: a run with such agents uses the LLM backend too)
POLICIES = ("scripted", "llm", "synthesis")
Policy = Literal["scripted", "llm", "synthesis"]


class LLMSpec(StrictNumbers):
    """Which LLM backend plays the `llm` policy and how it samples."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Literal["local", "langchain", "env"] = Field(
        "local", description="local: the embedded (or a local) transformers model; langchain: any LangChain chat model; "
                             "env: a policy outside, through the PettingZoo environment (sim.env; `model` names its episode)")
    model: Optional[str] = Field(None, description="local: a model folder or .gguf file (none: the embedded SmolLM2)")
    cls: Optional[str] = Field(None, description="langchain: the chat model class, module:Class (--llm)")
    args: dict[str, Any] = Field(default_factory=dict, description="langchain: the chat model's constructor arguments (--llm-arg)")
    temperature: float = Field(0.7, ge=0.0, le=5.0, allow_inf_nan=False, description="sampling temperature (0: greedy)")
    max_retries: int = Field(2, ge=0, le=20, description="langchain: re-asks of an unusable answer, and retries of a failed call")
    max_concurrency: int = Field(8, ge=1, le=1024, description="langchain: calls in flight at once")
    timeout_s: float = Field(60.0, gt=0.0, le=3600.0, allow_inf_nan=False, description="langchain: seconds a call may take")
    device: Optional[str] = Field(None, pattern=r"^(cpu|cuda(:\d+)?|mps)$",
                                  description="local: cpu, cuda, cuda:N or mps (none: cuda when there is one)")
    dtype: Optional[Literal["bf16", "bfloat16", "fp16", "float16", "fp32", "float32"]] = Field(
        None, description="local: weights' dtype (none: bf16 on CUDA and CPUs with bf16 instructions, else fp32)")
    threads: Optional[int] = Field(None, ge=1, le=512, description="local, CPU: torch threads (none: chosen per machine)")
    batch_tokens: Optional[int] = Field(None, ge=64, le=16_777_216,
                                        description="local: tokens per forward pass (none: chosen per device)")
    structured: Literal["auto", "json_schema", "vllm", "llama_cpp", "none"] = Field(
        "auto", description="langchain: how the server is made to answer inside the space (auto: json_schema for "
                            "OpenAI-compatible classes)")
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
    policy: Policy = "scripted"
    llm: LLMSpec = Field(default_factory=LLMSpec)
    # the decision contract the run was made under (sim.core.profiles): every spec the platform builds names
    # the current one; a spec that names none (stored before versions existed, or built by hand) is version 1
    contract: Literal[VERSIONS] = 1  # type: ignore[valid-type]
    # a rollout (`societas rollouts`): (index, tick) = decisions after `tick` draw the seeds of rollout `index`; the
    # ticks up to it are its parent's. None (every other run) is left out of the digest, so older specs hash as before
    rollout: Optional[tuple[int, int]] = None

    @property
    def profile(self) -> DecisionProfile:
        """The decision profile of the run's contract: how its decisions are made."""
        return profile(self.contract)

    def digest(self) -> str:
        """A short stable hash of the spec (under profiles that predate `contract`, a hash without it)."""
        exclude = set() if self.profile.digest_names_contract else {"contract"}
        if self.rollout is None:
            exclude.add("rollout")
        text = json.dumps(self.model_dump(mode="json", exclude=exclude), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def policies(self) -> frozenset[str]:
        """Who decides for the run's agents: `{"scripted"}`, `{"llm"}` or both."""
        return policies_used(self.config.get("population"), self.policy)

    @property
    def uses_llm(self) -> bool:
        """Whether the run needs the LLM backend: some agent is played by it, or runs a program it writes."""
        return bool({"llm", "synthesis"} & self.policies())


def policies_used(population: Optional[Sequence[Any]], policy: str) -> frozenset[str]:
    """The policies a population plays: each group's own, or the run's `policy` where a group names none.

    `population` holds groups as mappings (a stored spec's config) or objects with a `policy` attribute
    (a validated `PopulationGroup`); no population means every agent plays `policy`.
    """
    if not population:
        return frozenset({policy})
    own = (g.get("policy") if isinstance(g, Mapping) else g.policy for g in population)
    return frozenset(p or policy for p in own)
