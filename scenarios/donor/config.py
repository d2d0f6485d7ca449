"""The donor game's config: generations, games and rounds, the gift's multiplier, costly punishment, the first
generation's scripted strategy and its mutation, and the paper protocol's switches (its prompts, justification,
goal, cues)."""

from __future__ import annotations

import math
from typing import ClassVar, Literal, Optional

from pydantic import Field, model_validator

from sim.tick.config import ScenarioConfig

StrategyName = Literal["fixed", "defector", "image", "punisher", "random"]
MAX_TOTAL_ROUNDS = 10_000_000  # ticks a donor run may have


class DonorConfig(ScenarioConfig):
    """Config of the donor game; every field can be set with `--set key=value`."""

    count_field: ClassVar[str] = "agents"

    agents: int = Field(12, ge=2, le=10_000, description="players per generation (even)")
    rounds: int = Field(12, ge=1, le=10_000, description="rounds per game (hidden from the players); at most `agents`")
    generations: int = Field(10, ge=1, le=10_000, description="generations; each plays two games")
    total_rounds: Optional[int] = Field(None, ge=1, le=MAX_TOTAL_ROUNDS, description="ticks to run (one tick = one round of one game); default generations x 2 x rounds, less stops early")
    endowment: float = Field(10.0, gt=0, le=1e9, description="units each player starts each game with")
    multiplier: float = Field(2.0, ge=0, le=100, description="the recipient receives multiplier x the gift")
    strategy: StrategyName = Field("fixed", description="scripted strategy of the first generation")
    fraction: float = Field(0.5, ge=0, le=1, description="share of resources a giving scripted donor gives (fixed, image, punisher)")
    threshold: float = Field(0.1, ge=0, le=1, description="image/punisher: give only if the recipient's last gift share was at least this")
    trace_depth: int = Field(2, ge=0, le=10, description="reputation trace: the recipient's last action, its partner's before, ... this many steps")
    punishment: bool = Field(False, description="a donor may pay x to remove punish_multiplier x from the recipient instead of giving")
    punish_multiplier: float = Field(2.0, ge=0, le=100, description="units removed from the recipient per unit paid to punish")
    punish_fraction: float = Field(0.1, ge=0, le=1, description="share of resources a scripted punisher pays to punish")
    reasoning: int = Field(0, ge=0, le=1024, description="LLM donors justify their decision in at most this many tokens before "
                           "the amount, read after \"Answer:\" (Vallinder & Hughes ask for a justification first); 0: a bare number")
    goal: bool = Field(False, description="the rules end with the players' goal: maximise the units you have after the final round (Vallinder & Hughes)")
    reciprocity_cues: bool = Field(True, description="a recipient remembers who gave to or punished it (a direct-reciprocity cue "
                                   "that Vallinder & Hughes's pairing avoids: false there)")
    strategy_tokens: int = Field(40, ge=4, le=512, description="an LLM player's written strategy: at most this many tokens")
    mutation: float = Field(0.05, ge=0, le=1, description="s.d. of the Gaussian mutation of inherited fraction and threshold")
    prompts: Literal["platform", "vh2024"] = Field(
        "platform", description="what LLM players read: platform (the compact protocol: the rules, a percent asked) or "
                                "vh2024 (Vallinder & Hughes's system, strategy and donation prompts word for word, the gift "
                                "in units, no memory; survivors' strategies only in newcomers' strategy prompts)")

    @model_validator(mode="after")
    def _check(self) -> "DonorConfig":
        if self.agents % 2:
            raise ValueError(f"agents must be even (two halves donate in turn), got {self.agents}")
        if self.prompts == "vh2024" and self.punishment:
            raise ValueError("prompts=vh2024 renders the paper's game without punishment; its costly-punishment prompts "
                             "are not built: set punishment=false, or prompts=platform")
        if math.ceil(self.rounds / 2) > self.agents // 2:
            raise ValueError(f"rounds ({self.rounds}) must be at most agents ({self.agents}): a donor never gives to the same recipient twice in a game")
        full = self.generations * 2 * self.rounds
        if self.total_rounds is None:
            if full > MAX_TOTAL_ROUNDS:
                raise ValueError(f"generations x 2 x rounds = {full} ticks, more than a run may have ({MAX_TOTAL_ROUNDS}): "
                                 "set fewer generations or rounds, or total_rounds")
            object.__setattr__(self, "total_rounds", full)
        elif self.total_rounds > full:
            raise ValueError(f"total_rounds ({self.total_rounds}) must be at most generations x 2 x rounds = {full}")
        return self
