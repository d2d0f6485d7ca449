"""What makes a run reproducible: its `RunSpec` (scenario, validated config, seed, policy, LLM, contract).

Two runs with equal specs (and a warm LLM cache) store identical results; the spec is stored with
every run, so replay, resume, fork and the app rebuild the run from it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Optional

from pydantic import (BaseModel, ConfigDict, Field, SerializationInfo, StringConstraints, ValidationError, field_validator,
                      model_serializer)

from sim.core.fields import StrictNumbers
from sim.core.profiles import VERSIONS, DecisionProfile, profile


#: who decides for an agent: its scripted strategy, the LLM step by step, or a program the LLM wrote (run in the
#: sandbox; the LLM writes it: a run with such agents uses the LLM backend too)
POLICIES = ("scripted", "llm", "synthesis")
Policy = Literal["scripted", "llm", "synthesis"]


class LLMSpec(StrictNumbers):
    """Which LLM backend plays the `llm` policy and how it samples."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: Literal["local", "langchain", "served", "env"] = Field(
        "local", description="local: the embedded (or a local) transformers model; langchain: any LangChain chat model; "
                             "served: an OpenAI-compatible server at `endpoint` (vLLM, SGLang, llama.cpp, Ollama); "
                             "env: a policy outside, through the PettingZoo environment (sim.env; `model` names its episode)")
    model: Optional[str] = Field(None, description="local: a model folder or .gguf file (none: the embedded SmolLM2); "
                                                   "served: the served model's name")
    endpoint: Optional[str] = Field(None, min_length=1, max_length=2048, pattern=r"^https?://\S+$",
                                    description="served: the server's OpenAI-compatible base URL (http://127.0.0.1:8000/v1); "
                                                "its API key, if any, is read from $OPENAI_API_KEY, never stored")
    endpoints: Optional[tuple[Annotated[str, StringConstraints(min_length=1, max_length=2048, pattern=r"^https?://\S+$")], ...]] = Field(
        None, min_length=1, max_length=64,
        description="served: several servers of the same model (base URLs), a tick's batch split across them by prompt "
                    "prefix (agents.llm.endpoints); in place of `endpoint`")
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
    replicas: Optional[int] = Field(None, ge=1, le=1024,
                                    description="local: engine replicas as Ray actors, a tick's batch split across them "
                                                "(agents.llm.pool; none: the engine in this process)")
    structured: Literal["auto", "json_schema", "vllm", "llama_cpp", "none"] = Field(
        "auto", description="langchain: how the server is made to answer inside the space (auto: json_schema for "
                            "OpenAI-compatible classes)")
    # the prompt template: None = the built-in one; a name given to @register_template, or a reference
    # module:NAME / path/to/file.py:NAME to a PromptTemplate (or a function request -> chat messages)
    template: Optional[str] = Field(None, min_length=1, max_length=4096,
                                    description="prompt template: a @register_template name or module:NAME / file.py:NAME")
    # archetype decisions (agents.llm.archetypes): a tick's requests of one bucket (the scenario's `archetype` key)
    # share one LLM call, each agent's answer sampled from that call's distribution with its own seed
    archetypes: Optional[bool] = Field(None, description="one LLM call per archetype bucket of a tick's requests, each "
                                                         "agent's answer sampled from it with its own seed (docs/archetypes.md)")

    @field_validator("endpoints")
    @classmethod
    def _distinct(cls, urls: Optional[tuple[str, ...]]) -> Optional[tuple[str, ...]]:
        same = [u.rstrip("/") for u in urls or ()]  # "http://a/v1/" is "http://a/v1"
        if len(set(same)) < len(same):
            raise ValueError(f"lists {next(u for u, v in zip(urls, same) if same.count(v) > 1)!r} twice; give each "
                             "server once")
        return urls

    @model_serializer(mode="wrap")
    def _without_new_defaults(self, handler: Any, info: SerializationInfo) -> dict[str, Any]:
        """Fields added after runs were stored are left out while unset (None), so a spec that does not use them
        dumps, and so hashes (`RunSpec.digest`), as it did before they existed."""
        data = handler(self)
        for name in LATER_FIELDS:
            if data.get(name, 0) is None:
                del data[name]
        return data

    def label(self) -> str:
        """The model in a few words, for tables: `smollm2-135m t=0.2`, `served gpt-4o-mini t=0.7`, `ChatOpenAI ...`."""
        if self.provider == "local":
            name = Path(self.model).name if self.model else "embedded SmolLM2"
        elif self.provider == "served":
            more = f" (+{len(self.endpoints) - 1})" if self.endpoints and len(self.endpoints) > 1 else ""
            where = self.endpoint or (f"{self.endpoints[0]}{more}" if self.endpoints else None)
            name = f"served {self.model or '?'} at {where}"
        elif self.provider == "env":
            name = f"env {self.model or ''}".strip()
        else:
            shown = self.args.get("model") or self.args.get("model_name")
            name = (self.cls or "?").rpartition(":")[2] + (f" {shown}" if shown else "")
        return f"{name} t={self.temperature:g}"


#: LLMSpec fields added after runs were stored: left out of a dump while None (see `_without_new_defaults`)
LATER_FIELDS = ("endpoint", "endpoints", "replicas", "archetypes")


def group_llm(run_llm: LLMSpec, block: Mapping[str, Any]) -> LLMSpec:
    """The LLM a population group with its own `llm` block plays: the block's fields over the run's `llm` (a block
    naming another provider starts from the defaults instead: a served group of a local run keeps no local path).
    A block naming the servers (`endpoint` or `endpoints`) replaces the run's: neither is inherited beside it.
    Raises pydantic's ValidationError for a bad value."""
    base = run_llm.model_dump(mode="json") if block.get("provider", run_llm.provider) == run_llm.provider else {}
    if "endpoint" in block or "endpoints" in block:
        base = {k: v for k, v in base.items() if k not in ("endpoint", "endpoints")}
    return LLMSpec.model_validate({**base, **dict(block)})


def check_llm_block(block: Any) -> dict[str, Any]:
    """A population group's `llm` block checked on its own: a mapping of LLMSpec fields with valid values (those it
    leaves out come from the run's `llm`). Returns it as given; ValueError with one line naming the field otherwise."""
    if not isinstance(block, Mapping):
        raise ValueError(f"must be a mapping of llm settings (e.g. {{temperature: 0.2}} or {{model: path/to/model.gguf}}), "
                         f"got {str(block)[:60]!r}")
    if not block:
        raise ValueError("is empty: give the settings in which this group's model differs from the run's (e.g. "
                         "{temperature: 0.2}), or leave the block out")
    unknown = [k for k in block if k not in LLMSpec.model_fields]
    if unknown:
        raise ValueError(f"unknown llm field {str(unknown[0])[:40]!r}; valid: {', '.join(LLMSpec.model_fields)}")
    try:
        LLMSpec.model_validate(dict(block))
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise ValueError(f"{where}: {str(err['msg']).removeprefix('Value error, ')[:200]}") from None
    return dict(block)


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
