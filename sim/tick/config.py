"""The fields every scenario's config has, and the groups a population is made of.

A scenario's `Config` subclasses `ScenarioConfig`: the reward layer's settings, the population
and the agents' memory sizes come with it, values are finite, a boolean is never a number, and a
population's counts add up to the scenario's `count_field`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar, Optional

from pydantic import ConfigDict, Field, SerializationInfo, field_validator, model_serializer, model_validator

from sim.core.fields import StrictNumbers
from sim.core.spec import Policy, check_llm_block
from sim.reward.components import DEFAULT_WEIGHTS
from sim.reward.rewards import FeedbackMode, RewardMode


class PopulationGroup(StrictNumbers):
    """A group of agents sharing a policy (mixed populations: e.g. 4 LLM + 1 greedy)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(ge=1)
    policy: Optional[Policy] = None
    strategy: Optional[str] = None
    persona: Optional[str] = None
    enter: int = Field(1, ge=1, le=1_000_000, description="the tick the group joins (before it, its agents take no part: "
                       "GovSim's outsider joins in month 4); scenarios that support late entry only")
    llm: Optional[dict[str, Any]] = Field(None, description="the model this group's LLM agents play: llm settings over the "
                                          "run's (e.g. {temperature: 0.2}, {model: other.gguf}, {provider: served, endpoint: "
                                          "http://127.0.0.1:8000/v1, model: NAME}); none: the run's llm")
    name: Optional[str] = Field(None, min_length=1, max_length=40, pattern=r"^[A-Za-z0-9_.-]+$",
                                description="the group's name in tables and surveys (default: group N)")

    @field_validator("llm", mode="before")
    @classmethod
    def _llm_block(cls, block: Any) -> Any:
        return None if block is None else check_llm_block(block)

    @model_validator(mode="after")
    def _llm_for_llm_agents(self) -> "PopulationGroup":
        if self.llm is not None and self.policy not in (None, "llm"):
            raise ValueError(f"a group's llm block sets the model of LLM agents; this group plays {self.policy!r}")
        return self

    @model_serializer(mode="wrap")
    def _without_new_defaults(self, handler: Any, info: SerializationInfo) -> dict[str, Any]:
        """`llm` and `name`, added after runs were stored, are left out while unset: a config without them dumps, and
        so a spec hashes, as before."""
        data = handler(self)
        for key in ("llm", "name"):
            if data.get(key, 0) is None:
                del data[key]
        return data


class ScenarioConfig(StrictNumbers):
    """Fields every scenario has: the reward layer's settings, population and memory sizes.

    Values must be finite (`inf`/`nan` are refused) and at most `MAX_MAGNITUDE` in size; a boolean or a string is
    never taken for a number, in a field or inside one (`reward_weights: {payoff: true}`): `StrictNumbers`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    reward_mode: RewardMode = Field("private", description="what agents are rewarded: own, integrated or group payoff")
    lam: float = Field(0.0, ge=0.0, le=10.0, description="weight of others' payoffs in integrated mode")
    feedback: FeedbackMode = Field("sparse", description="sparse: own reward; dense: plus group metrics; none: nothing")
    reward_weights: dict[str, float] = Field(
        default_factory=lambda: dict(DEFAULT_WEIGHTS),
        description="the reward as a weighting of named reward components before the reward mode (default {payoff: 1}; "
                    "e.g. {payoff: 1, envy: -0.5, guilt: -0.25} is Fehr-Schmidt inequity aversion); "
                    "`societas scenarios` lists each scenario's components")
    population: Optional[list[PopulationGroup]] = Field(None, description="groups {count, policy, strategy, persona, enter, "
                                                        "llm, name}")
    memory_window: int = Field(8, ge=1, le=1000, description="recent memory items kept verbatim")
    memory_summary_chars: int = Field(400, ge=0, le=100_000, description="size of the running summary")

    #: the field that says how many agents a run has: a `population`'s counts must add up to it (None: the
    #: scenario sizes its agents some other way, and checks a `population` itself)
    count_field: ClassVar[Optional[str]] = None
    #: fields added after runs were stored whose None (unset) is left out of the config's dump, so that a config that
    #: does not use them dumps, and its run's spec hashes, as before they existed
    later_fields: ClassVar[tuple[str, ...]] = ()
    #: fields that may name a file or folder: a relative path is stored absolute (from the config file's folder,
    #: else the current one), so that a stored run reads the same data from anywhere
    path_fields: ClassVar[tuple[str, ...]] = ()

    def data_paths(self) -> dict[str, Path]:
        """The files and folders this config makes a run read, by field (none by default); the run records a
        fingerprint of each, and replay, resume and fork refuse data that changed since."""
        return {}

    @model_serializer(mode="wrap")
    def _without_later_fields(self, handler: Any, info: SerializationInfo) -> dict[str, Any]:
        data = handler(self)
        for key in type(self).later_fields:
            if data.get(key, 0) is None:
                del data[key]
        return data

    def llm_blocks(self, policy: str = "llm") -> list[tuple[str, Optional[dict[str, Any]]]]:
        """(who, `llm` block) for each group of LLM agents of a run of `policy`: the population's groups in order
        ("group 2", or its `name`; a scenario without a population names its own: the market's customers and
        businesses), the block None where the run's llm plays. Each distinct block is a model: `sim.tick.models`."""
        return [(g.name or f"group {k + 1}", g.llm) for k, g in enumerate(self.population or ())
                if (g.policy or policy) == "llm"]

    @model_validator(mode="after")
    def _population_adds_up(self) -> "ScenarioConfig":
        name = type(self).count_field
        if name and self.population:
            total, want = sum(g.count for g in self.population), getattr(self, name)
            if total != want:
                raise ValueError(f"population counts add up to {total}, but {name} is {want}")
        return self
