"""A grid game's stored steps as pictures' data: what each cell held after each step (walls, apples, the river's
waste, agents and where they face, the beams fired), decoded from the run's config (its map and beam) and the
state every tick stores (`GridModel.state`; waste and beams from decision contract 8 on: scenarios.grid.editions).

Pure data, no drawing: the app's replay draws these rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np
import pandas as pd

from scenarios.grid import maps as grid_maps
from scenarios.grid.world import beam_cells

#: the layers a frame's cells belong to, drawn in this order (a later one on top)
LAYERS = ("wall", "river", "apple", "waste", "beam", "clean beam", "agent", "tagged out")
CELL_COLUMNS = ["tick", "row", "col", "layer", "agent"]
AGENT_COLUMNS = ["tick", "agent", "row", "col", "orient", "timeout", "out"]
#: the direction an orientation faces, as an arrow
ARROWS = {0: "↑", 1: "→", 2: "↓", 3: "←"}


@dataclass(frozen=True)
class Board:
    """What never changes in a run: its map's walls, apple points and river cells, and its beam's reach."""

    walls: np.ndarray
    apples: tuple[tuple[int, int], ...]
    river: tuple[tuple[int, int], ...]
    beam_length: int
    beam_width: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.walls.shape  # type: ignore[return-value]


def board(config: Mapping[str, Any], maps: Mapping[str, str]) -> Board:
    """The run's board: its `map` (one of the game's built-in `maps`, or a map file) and beam settings."""
    grid_map = grid_maps.load(str(config.get("map", "large")), dict(maps))
    return Board(walls=np.asarray(grid_map.walls), apples=tuple(grid_map.apples), river=tuple(grid_map.river),
                 beam_length=int(config.get("beam_length", 20)), beam_width=int(config.get("beam_width", 1)))


def agents_of(state: Mapping[str, Any]) -> list[tuple[int, int, int, int]]:
    """(row, col, orientation, timeout) of each agent, from the state's flat `agents` list."""
    flat = list(state.get("agents") or [])
    return [tuple(int(v) for v in flat[i:i + 4]) for i in range(0, len(flat) - 3, 4)]  # type: ignore[misc]


def has_waste_and_beams(state: Mapping[str, Any]) -> bool:
    """Whether a stored state holds the waste and beams (runs of decision contract 8 on), not only positions."""
    return "beams" in state


def frame(b: Board, tick: int, state: Mapping[str, Any]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One step: its cells (tick, row, col, layer, agent: the agent a beam or an agent cell belongs to) and its agents
    (tick, agent, row, col, orient, timeout, out)."""
    cells: list[tuple[int, int, int, str, Optional[int]]] = []
    live = str(state.get("apples") or "")
    for k, (r, c) in enumerate(b.apples):
        if k < len(live) and live[k] == "1":
            cells.append((tick, r, c, "apple", None))
    waste = str(state.get("waste") or "")
    for k, (r, c) in enumerate(b.river):
        cells.append((tick, r, c, "waste" if k < len(waste) and waste[k] == "1" else "river", None))
    placed = agents_of(state)
    for kind, key in (("beam", "beams"), ("clean beam", "cleans")):
        for i in state.get(key) or []:
            if 0 <= int(i) < len(placed):
                r, c, orient, _ = placed[int(i)]
                cells += [(tick, rr, cc, kind, int(i)) for rr, cc in beam_cells(b.walls, (r, c), orient, b.beam_length,
                                                                                b.beam_width)]
    agents = [(tick, i, r, c, o, t, t > 0) for i, (r, c, o, t) in enumerate(placed)]
    cells += [(tick, r, c, "tagged out" if out else "agent", i) for _, i, r, c, _, _, out in agents]
    return (pd.DataFrame(cells, columns=CELL_COLUMNS),
            pd.DataFrame(agents, columns=AGENT_COLUMNS))


def frames(b: Board, states: Mapping[int, Mapping[str, Any]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`frame` of every stored step, concatenated (the walls are the board's, not repeated)."""
    parts = [frame(b, int(t), s) for t, s in sorted(states.items())]
    if not parts:
        return pd.DataFrame(columns=CELL_COLUMNS), pd.DataFrame(columns=AGENT_COLUMNS)
    return (pd.concat([p[0] for p in parts], ignore_index=True), pd.concat([p[1] for p in parts], ignore_index=True))


def walls(b: Board) -> pd.DataFrame:
    """The wall cells (row, col)."""
    rows, cols = np.nonzero(b.walls)
    return pd.DataFrame({"row": rows.astype(int), "col": cols.astype(int)})
