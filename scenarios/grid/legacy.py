"""The grid games' pieces as runs of earlier decision contracts were made with, frozen so that those runs replay.

Nothing here is used by a new run: `scenarios.grid.editions` points the older contracts at these pieces. Do not
change them; a change of the current behaviour copies the piece it changes here first.

- contracts 1-7: a step's stored state holds the episode, the step, each agent's position, orientation and
  timeout, and the live apples (`positions_and_apples`): not the river's waste nor the beams fired.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from scenarios.grid.world import bit_string

if TYPE_CHECKING:
    from scenarios.grid.model import GridModel


def positions_and_apples(model: "GridModel") -> dict[str, Any]:
    """The stored state of contracts 1-7."""
    w = model.world
    return {"episode": model.episode, "step": model.step_in_episode(),
            "agents": np.column_stack([w.pos, w.orient, w.timeout]).ravel().tolist(),
            "apples": bit_string(w.alive_apples())}
