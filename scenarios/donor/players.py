"""The donor game's players: resources, inherited parameters, a written strategy and recent actions; and what the
start of a game resets in each (the current piece of the donor's editions: `scenarios.donor.editions`)."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Optional

from sim.contracts.agent import SocietyAgent

if TYPE_CHECKING:
    from scenarios.donor.model import DonorModel


class Donor(SocietyAgent):
    """A player: resources, inherited parameters, its written strategy and its recent actions.

    `name` is the paper's name for it ("2_3": the third newcomer of generation 2), which `prompts: vh2024` shows.
    """

    def __init__(self, model: "DonorModel", policy: str, strategy: str, persona: str,
                 params: Mapping[str, float], generation: int, parent: Optional[int] = None, index: int = 1) -> None:
        super().__init__(model, policy=policy, strategy=strategy, persona=persona, memory=model.new_memory())
        self.params = dict(params)
        self.generation = generation
        self.parent = parent
        self.name = f"{generation}_{index}"
        self.resources = model.config.endowment
        self.finals: list[float] = []  # final resources of each game played
        self.strategy_text: Optional[str] = None
        #: (tick, "give" or "punish", share of resources, units, recipient id), newest last
        self.actions: deque[tuple[int, str, float, float, int]] = deque(maxlen=model.config.trace_depth + 1)
        self._keeps_memory = model.config.prompts == "platform"

    @property
    def remembers(self) -> bool:
        """An LLM player keeps memory, except under the paper's prompts: Vallinder & Hughes's players have none (their
        donation prompt shows no past gift, total or survival)."""
        return self._keeps_memory and self.policy == "llm"

    @property
    def score(self) -> float:
        """Average final resources over the games played this generation."""
        return sum(self.finals) / len(self.finals) if self.finals else self.resources


def start_game(player: Donor, endowment: float) -> None:
    """A game's start (decision contract 8 on): the player holds `endowment` again and its reputation trace starts
    empty, as Vallinder & Hughes reset every trace at round 1 of each game (a trace of game 1 would tell amounts of
    resources that game 2 reset)."""
    player.resources = endowment
    player.actions.clear()
