"""The fishery's config: the lake, the institutions (talk, votes, sanctions, social learning), GovSim's protocol
switches, and the fishers' initial disposition."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from scenarios.commons import govsim
from sim.tick.config import ScenarioConfig

StrategyName = Literal["sustainable", "greedy", "fixed", "random", "conditional"]
DISPOSITIONS = {  # disposition -> (persona of LLM fishers, strategy of scripted fishers)
    "altruistic": ("a fisher who cares about the whole group and wants the lake to last for everyone", "sustainable"),
    "selfish": ("a fisher who cares only about maximising your own catch", "greedy"),
}


class CommonsConfig(ScenarioConfig):
    """Config of the fishery; every field can be set with `--set key=value`."""

    count_field: ClassVar[str] = "fishers"

    fishers: int = Field(5, ge=1, le=1_000_000, description="number of fishers")
    capacity: float = Field(100.0, gt=0, le=1e9, description="lake capacity in tons (starts full)")
    months: int = Field(12, ge=1, le=100_000, description="months to run unless the lake collapses")
    collapse_below: float = Field(5.0, ge=0, description="stock under which the lake collapses")
    regrowth: float = Field(2.0, ge=1.0, le=100.0, description="factor the remaining stock multiplies by")
    strategy: StrategyName = Field("sustainable", description="scripted strategy of the fishers")
    catch: float = Field(10.0, ge=0, description="tons per month for the `fixed` strategy")
    talk: bool = Field(False, description="fishers post a message (a proposed limit) before fishing")
    sanctions: bool = Field(False, description="fishers may pay to fine those over the group's norm")
    sanction_cost: float = Field(1.0, ge=0, description="cost to the sanctioner")
    sanction_fine: float = Field(3.0, ge=0, description="fine to the sanctioned")
    social_learning: bool = Field(False, description="fishers may copy a more successful peer's strategy and stated belief")
    norm_formation: bool = Field(False, description="fishers propose a catch limit and vote; the majority's choice is the norm in force")
    vote_every: int = Field(1, ge=1, le=100_000, description="months between propose/vote rounds (month 1 always votes)")
    vote_rule: Literal["majority", "plurality"] = Field("majority", description="majority: adopted only with more than half the votes; plurality: the most votes (ties: the lower limit)")
    sanction_growth: float = Field(0.0, ge=0, le=100, description="graduated sanctions: fine = sanction_fine x (1 + sanction_growth x the violator's earlier violations)")
    monitoring_cost: float = Field(0.0, ge=0, le=1e6, description="cost to every fisher of each month a norm is in force and sanctions are on")
    start_fraction: float = Field(1.0, gt=0, le=1, description="share of the capacity the lake starts with (rich 1.0, scarce e.g. 0.3)")
    conversation_rounds: int = Field(0, ge=0, le=10, description="after the harvest the mayor reports every catch and the fishers "
                                     "talk this many rounds, each seeing the rounds before (GovSim's conversation; 0: none); "
                                     "the median limit stated is the group's agreed limit next month")
    reflection: bool = Field(False, description="at the month's end each LLM fisher writes one insight into its memory (GovSim's reflection)")
    reasoning: int = Field(0, ge=0, le=1024, description="LLM fishers reason in at most this many tokens before each catch, "
                           "then answer after \"Answer:\" (GovSim's step-by-step prompt); 0: a bare number")
    disclose_collapse: bool = Field(True, description="the situation states the collapse threshold (GovSim's prompt does not)")
    disclose_horizon: bool = Field(True, description="the situation says \"month M of N\" (GovSim's says the month only)")
    disposition: Literal["none", "altruistic", "selfish"] = Field("none", description="initial disposition: the LLM fishers' persona and the scripted strategy (sustainable / greedy) where no group names one")
    protocol: Literal["compact", "govsim"] = Field("compact", description="the words and the month LLM fishers get: compact "
                                                  "(ours: one short situation, the harvest question, the median limit stated as "
                                                  "the agreement) or govsim (GovSim's texts word for word: its system text, "
                                                  "harvest task, group chat, dated key memories, the agreed limit read from the "
                                                  "chat or N/A, two thoughts, insights; a collapsing month still talks; "
                                                  "docs/protocols.md)")

    @model_validator(mode="after")
    def _check(self) -> "CommonsConfig":
        if self.collapse_below >= self.capacity:
            raise ValueError(f"collapse_below ({self.collapse_below:g}) must be below capacity ({self.capacity:g})")
        entries = [g.enter for g in self.population or ()]
        if entries and min(entries) > 1:
            raise ValueError("some population group must take part from month 1 (enter: 1)")
        if entries and max(entries) > self.months:
            raise ValueError(f"a population group enters in month {max(entries)}, after the last month ({self.months})")
        if self.protocol == "govsim" and (problem := govsim.checked(self)):
            raise ValueError(problem)
        if self.start_fraction * self.capacity <= self.collapse_below:
            raise ValueError(f"start_fraction x capacity ({self.start_fraction * self.capacity:g}) must be above collapse_below ({self.collapse_below:g})")
        return self
