"""The grid games' editions: what a run of each decision contract is made with, where the games changed.

| contracts | a step's stored state |
|---|---|
| 1-7 | episode, step, agents (row, col, orientation, timeout each), live apples |
| 8- (every new run) | the same, and the river's waste and the beams fired (tagging and cleaning), which the app's replay draws |

`GridModel` picks its run's edition once (sim.tick.editions); the old pieces are in `scenarios.grid.legacy`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from scenarios.grid import legacy
from scenarios.grid.world import bit_string
from sim.tick.editions import Editions

if TYPE_CHECKING:
    from scenarios.grid.model import GridModel


@dataclass(frozen=True)
class GridEdition:
    """The grid games' pieces that changed between decision contracts."""

    #: a step's stored world state (`SocietyModel.state`)
    state: Callable[["GridModel"], dict[str, Any]]


def recorded_state(model: "GridModel") -> dict[str, Any]:
    """Contract 8 on: the positions and apples of before, the river's waste (one character a river cell, in the map's
    reading order: '1' polluted), and who fired a beam this step (`beams`: tagging, `cleans`: cleaning; agent
    positions in the state's order)."""
    w = model.world
    out = legacy.positions_and_apples(model)
    out["waste"] = bit_string(w.river_waste())
    out["beams"] = w.fired.nonzero()[0].tolist()
    out["cleans"] = w.cleaning.nonzero()[0].tolist()
    return out


CURRENT = GridEdition(state=recorded_state)
CONTRACT_1 = GridEdition(state=legacy.positions_and_apples)

EDITIONS: Editions[GridEdition] = Editions({1: CONTRACT_1, 8: CURRENT})
