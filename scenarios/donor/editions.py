"""The donor game's editions: what a run of each decision contract is made with, where the donor game changed.

| contracts | a game's start resets |
|---|---|
| 1-7 | each player's resources (the reputation trace is cleared at a generation's start only) |
| 8- (every new run) | each player's resources and its reputation trace (Vallinder & Hughes's reset at round 1 of each game) |

`DonorModel` picks its run's edition once (sim.tick.editions); the old pieces are in `scenarios.donor.legacy`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scenarios.donor import legacy
from scenarios.donor.players import start_game
from sim.tick.editions import Editions


@dataclass(frozen=True)
class DonorEdition:
    """The donor game's pieces that changed between decision contracts."""

    #: what a game's start does to a player (player, endowment)
    start_game: Callable[[Any, float], None]


CURRENT = DonorEdition(start_game)
CONTRACT_1 = DonorEdition(legacy.resources_only)

EDITIONS: Editions[DonorEdition] = Editions({1: CONTRACT_1, 8: CURRENT})
