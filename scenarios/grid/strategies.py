"""Scripted policies of the grid games, as in the policy-synthesis paper's `gathering_policy.py`.

- `random`: any action, uniformly (beams and, in Cleanup, cleaning included);
- `greedy`: a shortest walk to the nearest live apple; never beams or cleans (stands when none is reachable);
- `exploitative`: beams when a rival stands in its beam, turns when one turn would bring one in,
  otherwise as greedy (the code's chase of half-tagged rivals is left out);
- `cooperative`: Gathering: the apple points are split into as many compact territories as there are
  cooperative agents (recursive bisection; the code sorts them into bands by row) and each agent, matched
  greedily to the nearest territory, only takes apples of its own and waits at its centre when none is
  live; never beams. Under density regrowth (Commons) it also leaves every apple with fewer than two live
  apples near it, so that its patch regrows (Perolat et al.'s sustainable harvesting). Cleanup: a role split that
  follows the waste (the paper's best synthesised policy): while the river's waste share is s, the first
  ceil(n x min(1, s / depletion) + 0.5) cooperative agents (by id; at least one) clean — walk to the
  nearest waste and fire the cleaning beam when waste lies in it — and the others harvest as greedy.

Each reads the request's `observation["view"]`, a `GridView` of this tick: a read-only window on the world
(`WorldView`: its arrays cannot be written, its attributes cannot be set), the agent's position in it and
per-tick and per-episode caches that every agent of the tick shares (the distance field to the nearest apple is
computed once per tick, not once per agent). What leaves the process (the PettingZoo environment's
observations) is the view's `as_data()`, a copy.
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Callable, Optional

import numpy as np

from scenarios.grid.api import bfs_first_step
from scenarios.grid.world import (ACTIONS, CLEAN, STAND, UNREACHABLE, GridWorld, Rules, move, turn_toward)
from sim.core.contracts import DecisionRequest
from sim.core.observations import View, read_only

#: the world's arrays a strategy reads (each as a read-only view)
_ARRAYS = ("walls", "apples", "waste", "pos", "orient", "timeout", "hits", "apple_pos", "apple_index", "free")


class WorldView:
    """A read-only window on a `GridWorld`: its arrays as views that cannot be written, its rules and its queries
    (distance fields, beams, local stock); setting an attribute raises. It follows the world as it changes."""

    __slots__ = ("_world", *_ARRAYS)

    def __init__(self, world: GridWorld) -> None:
        object.__setattr__(self, "_world", world)
        for name in _ARRAYS:
            object.__setattr__(self, name, read_only(getattr(world, name)))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"the world is read-only to its agents (cannot set {name!r})")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"the world is read-only to its agents (cannot delete {name!r})")

    @property
    def rules(self) -> Rules:
        return self._world.rules  # frozen

    @property
    def height(self) -> int:
        return self._world.height

    @property
    def width(self) -> int:
        return self._world.width

    @property
    def n(self) -> int:
        return self._world.n

    def distance_field(self, targets: np.ndarray) -> np.ndarray:
        return self._world.distance_field(targets)

    def descend(self, field: np.ndarray, i: int) -> tuple[int, int]:
        return self._world.descend(field, i)

    def in_beam(self, i: int, orient: Optional[int] = None) -> np.ndarray:
        return self._world.in_beam(i, orient)

    def beam_cells(self, i: int, orient: Optional[int] = None) -> list[tuple[int, int]]:
        return self._world.beam_cells(i, orient)

    def local_stock(self, alive: Optional[np.ndarray] = None) -> np.ndarray:
        return self._world.local_stock(alive)

    def waste_share(self) -> float:
        return self._world.waste_share()

    def alive_apples(self) -> np.ndarray:
        """Which of the map's apple cells hold an apple now (a copy)."""
        return self._world.alive_apples()


class GridView(View):
    """What every scripted agent of a tick sees: the world (read-only), who is where, and shared caches."""

    def __init__(self, world: GridWorld, index: Mapping[int, int], strategies: Mapping[int, str], episode: dict,
                 cleanup: bool, step: int = 0) -> None:
        self.world = WorldView(world)
        self.index = MappingProxyType(index)  # agent id -> its position in the world's arrays
        self.strategies = MappingProxyType(strategies)  # agent id -> scripted strategy (who is cooperative)
        self.episode = episode  # per-episode cache (zones), emptied when an episode starts
        self.cleanup = cleanup
        self.step = step  # the step of the episode
        self._fields: dict[str, np.ndarray] = {}

    def as_data(self) -> dict[str, Any]:
        """The tick's world as plain data (copies): the map, apples, waste, every agent's position, orientation,
        timeout and beam hits (by position; `index` maps agent ids to positions) and the rules."""
        w = self.world
        return {"height": w.height, "width": w.width, "step": self.step, "walls": w.walls.copy(),
                "apples": w.apples.copy(), "waste": w.waste.copy(), "apple_pos": w.apple_pos.copy(),
                "agent_pos": w.pos.copy(), "agent_orient": w.orient.copy(), "agent_timeout": w.timeout.copy(),
                "agent_beam_hits": w.hits.copy(), "index": dict(self.index), "rules": dataclasses.asdict(w.rules)}

    def field(self, name: str) -> np.ndarray:
        """The distance field to the nearest live apple (`apple`) or waste cell (`waste`), once per tick."""
        if name not in self._fields:
            w = self.world
            self._fields[name] = w.distance_field(w.apples if name == "apple" else w.waste)
        return self._fields[name]


def _view(request: DecisionRequest) -> tuple[GridView, int]:
    view = request.observation["view"]
    return view, view.index[request.agent_id]


def _action(i: int) -> str:
    return ACTIONS[i]


def greedy_index(view: GridView, i: int) -> int:
    """Greedy's action index for agent i: down the apple distance field."""
    w = view.world
    return move(w.descend(view.field("apple"), i), int(w.orient[i]))


def greedy(request: DecisionRequest, rng: random.Random) -> str:
    view, i = _view(request)
    if view.world.timeout[i] > 0:
        return "stand"
    return _action(greedy_index(view, i))


def random_action(request: DecisionRequest, rng: random.Random) -> str:
    view, _ = _view(request)
    return ACTIONS[rng.randrange(9 if view.cleanup else 8)]


def exploitative(request: DecisionRequest, rng: random.Random) -> str:
    view, i = _view(request)
    w = view.world
    if w.timeout[i] > 0:
        return "stand"
    if w.rules.beam:
        if len(w.in_beam(i)):
            return "beam"
        o = int(w.orient[i])
        left, right = (o - 1) % 4, (o + 1) % 4
        score = {}
        for side in (left, right):
            hit = w.in_beam(i, side)
            if len(hit):
                score[side] = max(int(w.hits[j]) for j in hit)
        if score:
            best = max(score, key=lambda s: (score[s], s == left))
            return _action(turn_toward(o, best))
    return _action(greedy_index(view, i))


# ----- cooperative --------------------------------------------------------------------------------------------
def _zones(view: GridView) -> dict[int, tuple[set[tuple[int, int]], np.ndarray]]:
    """Gathering: each cooperative agent's band of apple points and the distance field to its centre (once per episode)."""
    cached = view.episode.get("zones")
    if cached is not None:
        return cached
    w = view.world
    coop = sorted(a for a, s in view.strategies.items() if s == "cooperative")
    points = sorted(map(tuple, w.apple_pos.tolist()))
    n = len(coop)
    groups = bisect(points, n) if n else []
    fields = []  # each band's distance field (band cells as targets)
    for g in groups:
        mask = np.zeros(w.walls.shape, dtype=bool)
        for r, c in g:
            mask[r, c] = True
        fields.append(w.distance_field(mask))
    pairs = sorted((int(fields[g][int(w.pos[view.index[a], 0]), int(w.pos[view.index[a], 1])]), a, g)
                   for a in coop for g in range(n))
    used_a: set[int] = set()
    used_g: set[int] = set()
    zones = {}
    for _, a, g in pairs:  # greedy matching: the nearest (agent, band) pair first
        if a in used_a or g in used_g:
            continue
        used_a.add(a)
        used_g.add(g)
        cells = set(groups[g])
        if cells:
            cr = round(sum(r for r, _ in cells) / len(cells))
            cc = round(sum(c for _, c in cells) / len(cells))
            centre = np.zeros(w.walls.shape, dtype=bool)
            free = np.argwhere(~w.walls)
            near = free[np.argmin(np.abs(free[:, 0] - cr) + np.abs(free[:, 1] - cc))]
            centre[near[0], near[1]] = True
            zones[a] = (cells, w.distance_field(centre))
        else:
            zones[a] = (cells, np.full(w.walls.shape, UNREACHABLE, dtype=np.int32))
    view.episode["zones"] = zones
    return zones


def bisect(points: list[tuple[int, int]], n: int) -> list[list[tuple[int, int]]]:
    """`points` split into n compact territories of near-equal size: cut along the longer side, in proportion to the
    territories each half gets, and again (recursive bisection; the paper's cooperative policy cut bands by row)."""
    if n <= 1 or len(points) <= 1:
        return [list(points)] + [[] for _ in range(n - 1)] if n >= 1 else []
    rows = [p[0] for p in points]
    cols = [p[1] for p in points]
    axis = 0 if max(rows) - min(rows) >= max(cols) - min(cols) else 1
    ordered = sorted(points, key=lambda p: (p[axis], p[1 - axis]))
    left = n // 2
    cut = round(len(ordered) * left / n)
    return bisect(ordered[:cut], left) + bisect(ordered[cut:], n - left)


def _local_stock(view: GridView) -> np.ndarray:
    """Density regrowth: each apple point's live apples within the radius (once per tick)."""
    if "stock" not in view._fields:
        view._fields["stock"] = view.world.local_stock()
    return view._fields["stock"]


def _cleaners(view: GridView) -> set[int]:
    """Cleanup: the cooperative agents that clean this tick (by id, as many as the waste calls for)."""
    if "cleaners" not in view._fields:
        coop = sorted(a for a, s in view.strategies.items() if s == "cooperative")
        w = view.world
        share = w.waste_share()
        k = min(len(coop), max(1, math.ceil(len(coop) * min(1.0, share / max(w.rules.depletion, 1e-9)) - 0.5))) if coop else 0
        view._fields["cleaners"] = set(coop[:k])  # type: ignore[assignment]
    return view._fields["cleaners"]  # type: ignore[return-value]


def _clean_action(view: GridView, i: int) -> int:
    w = view.world
    o = int(w.orient[i])
    if any(w.waste[r, c] for r, c in w.beam_cells(i)):
        return CLEAN
    for side in ((o - 1) % 4, (o + 1) % 4, (o + 2) % 4):
        if any(w.waste[r, c] for r, c in w.beam_cells(i, side)):
            return turn_toward(o, side)
    step = w.descend(view.field("waste"), i)
    return move(step, o) if step != (0, 0) else STAND


def cooperative(request: DecisionRequest, rng: random.Random) -> str:
    view, i = _view(request)
    w = view.world
    if w.timeout[i] > 0:
        return "stand"
    if view.cleanup:
        if request.agent_id in _cleaners(view) and w.waste.any():
            return _action(_clean_action(view, i))
        return _action(greedy_index(view, i))
    zone = _zones(view).get(request.agent_id)
    if zone is None:
        return _action(greedy_index(view, i))
    cells, centre = zone
    start = (int(w.pos[i, 0]), int(w.pos[i, 1]))
    live = {p for p in cells if w.apples[p]}
    if w.rules.regrowth == "density":  # restraint: leave an apple that keeps fewer than 2 live apples near it
        keep = _local_stock(view)
        live = {p for p in live if keep[w.apple_index[p]] >= 2}
    step = bfs_first_step(w.walls, start, live) if live else None
    if step is None:
        step = w.descend(centre, i)
    return _action(move(step, int(w.orient[i])))


STRATEGIES: dict[str, Callable[[DecisionRequest, random.Random], Any]] = {
    "random": random_action, "greedy": greedy, "exploitative": exploitative, "cooperative": cooperative,
}
