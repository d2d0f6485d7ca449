"""The rules of the two grid games, on a Mesa grid: moves, turns, beams, apples, waste.

Leibo et al.'s Gathering (2017), Perolat et al.'s Commons regrowth (2017) and Hughes et al.'s Cleanup
(2018), as the policy-synthesis paper's code implements them (arXiv 2603.19453,
vicgalle/llm-policies-social-dilemmas: `gathering_env.py`, `cleanup_env.py`). One `step` is one
environment step for every agent:

1. timeouts count down (a tagged agent is out while its timeout is above 0);
2. each active agent's action, in the tick's seeded order: moves are relative to its orientation and
   need no turn first (forward, backward, step left, step right), turns change where beams go; the
   tagging beam hits other active agents in a band `beam_length` ahead and `beam_width` wide
   (`hits_to_tag` hits: out for `timeout_steps`); in Cleanup the beam costs its firer `fire_cost` and
   each agent hit `fire_penalty`, and the cleaning beam (cost `clean_cost`) clears the waste it covers;
3. apples regrow: a fixed timer per apple (Gathering), a chance by the number of live apples within
   `density_radius` (Commons: 0 with none, 1% with 1-2, 5% with 3-4, 10% with more), or, in Cleanup,
   one waste cell may appear (`waste_spawn_prob`, while the river's waste share is below
   `depletion`) and each empty apple cell grows with a chance that falls linearly from
   `apple_respawn_prob` (waste share at or below `restoration`) to 0 (at `depletion`);
4. each active agent on a live apple takes it (+1), in agent order.

Departures from the code, each without effect on its maps: a beam stops at the first wall in each of its
lanes (the code skips wall cells and goes on past them; its maps have walls only at the border); an agent
may step onto the cell of a tagged-out agent, so the two share it once the timeout ends, as there. At the start
every agent has a cell of its own: a config with more agents than the map's start cells is refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import numpy as np
from mesa.discrete_space import OrthogonalVonNeumannGrid

from scenarios.grid.api import (ACTIONS, BACKWARD, BEAM, CLEAN, DIRS, FORWARD, FRAMES, ROTATE_LEFT, ROTATE_RIGHT, STAND,
                                STEP_LEFT, STEP_RIGHT, direction_to_action)
from scenarios.grid.maps import GridMap

#: the actions in the papers' numbering, orientation frames and BFS order are the policy API's (one definition)
INDEX = {name: i for i, name in enumerate(ACTIONS)}
UNREACHABLE = np.iinfo(np.int32).max
_DENSITY = np.array([0.0, 0.01, 0.01, 0.05, 0.05])  # Commons regrowth by local stock 0..4; 0.1 above


@dataclass(frozen=True)
class Rules:
    """The numbers of one game (the scenario's config picks them)."""

    beam_length: int = 20
    beam_width: int = 1
    hits_to_tag: int = 2
    timeout_steps: int = 25
    beam: bool = True
    regrowth: str = "fixed"  # fixed | density | cleanup
    respawn_time: int = 25
    density_radius: int = 2
    fire_cost: float = 0.0
    fire_penalty: float = 0.0
    clean_cost: float = 1.0
    depletion: float = 0.4
    restoration: float = 0.0
    waste_spawn_prob: float = 0.5
    apple_respawn_prob: float = 0.05
    blocking: bool = True  # an agent cannot step into a cell an active agent holds


def move(dr_dc: tuple[int, int], orient: int) -> int:
    """The action that steps one cell in world direction (dr, dc) facing `orient` (stand for (0, 0))."""
    return direction_to_action(dr_dc[0], dr_dc[1], orient)


def turn_toward(orient: int, target: int) -> int:
    """The turn that brings `orient` closer to `target` (stand when it faces it)."""
    diff = (target - orient) % 4
    return STAND if diff == 0 else ROTATE_RIGHT if diff in (1, 2) else ROTATE_LEFT


def beam_cells(walls: np.ndarray, at: tuple[int, int], orient: int, length: int, width: int) -> list[tuple[int, int]]:
    """The cells a beam fired from `at` facing `orient` covers: `width` lanes (odd, centred) of up to `length` cells
    ahead, each lane stopping at a wall or the map's edge (the world's beams, and a replay's drawing of them)."""
    fwd, right = FRAMES[int(orient)]
    height, breadth = walls.shape
    r0, c0 = at
    cells = []
    for lane in range(-(width // 2), width // 2 + 1):
        for dist in range(1, length + 1):
            r = r0 + fwd[0] * dist + right[0] * lane
            c = c0 + fwd[1] * dist + right[1] * lane
            if not (0 <= r < height and 0 <= c < breadth) or walls[r, c]:
                break
            cells.append((r, c))
    return cells


class GridWorld:
    """The state of one grid game: a Mesa `OrthogonalVonNeumannGrid` with property layers `wall`, `apple`
    and `waste`, and the agents' positions, orientations, timeouts and beam hits as arrays (the rules
    read them in bulk; each agent's Mesa `cell` follows its position)."""

    def __init__(self, grid_map: GridMap, rules: Rules, n_agents: int, rng: np.random.Generator, random) -> None:
        self.map, self.rules, self.n, self.rng = grid_map, rules, n_agents, rng
        h, w = grid_map.shape
        self.height, self.width = h, w
        self.grid = OrthogonalVonNeumannGrid((h, w), torus=False, capacity=None, random=random)
        for name, dtype in (("wall", bool), ("apple", bool), ("waste", bool)):
            self.grid.create_property_layer(name, default_value=False, dtype=dtype)
        self.walls = self.grid.wall.data
        self.walls[:] = grid_map.walls
        self.apples = self.grid.apple.data  # (H, W): a live apple
        self.waste = self.grid.waste.data  # (H, W): a polluted river cell
        self.apple_pos = np.array(grid_map.apples, dtype=np.int32).reshape(-1, 2)
        self.apple_index = np.full((h, w), -1, dtype=np.int32)
        self.apple_index[self.apple_pos[:, 0], self.apple_pos[:, 1]] = np.arange(len(self.apple_pos))
        self.apple_timer = np.zeros(len(self.apple_pos), dtype=np.int32)
        self.river = np.array(grid_map.river, dtype=np.int32).reshape(-1, 2)
        self.pos = np.zeros((n_agents, 2), dtype=np.int32)
        self.orient = np.zeros(n_agents, dtype=np.int32)
        self.timeout = np.zeros(n_agents, dtype=np.int32)
        self.hits = np.zeros(n_agents, dtype=np.int32)
        self.beamed: list[tuple[int, int]] = []  # (firer, hit) this step
        self.fired = np.zeros(n_agents, dtype=np.int32)  # tagging beams fired this step, by agent
        self.cleaning = np.zeros(n_agents, dtype=np.int32)  # cleaning beams fired this step, by agent
        self.cleaned = 0  # waste cells cleared this step
        self.collected = np.zeros(n_agents, dtype=np.int32)  # apples taken this step, by agent
        self.free = ~self.walls
        self._adjacent = self._adjacency()
        taken = set(grid_map.spawns)  # where agents start after the spawn points: the other open cells (linear in them)
        self._extra_cells = [p for p in (grid_map.open_cells or grid_map.spawns) if p not in taken] or list(grid_map.spawns)

    # ----- the episode ---------------------------------------------------------------------------------
    def reset(self) -> None:
        """Start an episode: agents on shuffled spawn points (then random open cells), orientations drawn,
        every apple alive, the map's polluted river cells polluted, no timeouts."""
        spawns = list(self.map.spawns)
        order = self.rng.permutation(len(spawns)) if spawns else []
        cells = self._extra_cells
        extra = self.rng.permutation(len(cells))
        for i in range(self.n):
            if i < len(spawns):
                self.pos[i] = spawns[int(order[i])]
            else:  # distinct open cells (the config refuses more agents than the map has start cells for)
                k = i - len(spawns)
                self.pos[i] = cells[int(extra[k % len(cells)])]
            self.orient[i] = int(self.rng.integers(4))
        self.timeout[:] = 0
        self.hits[:] = 0
        self.apples[:] = False
        if len(self.apple_pos):
            self.apples[self.apple_pos[:, 0], self.apple_pos[:, 1]] = True
        self.apple_timer[:] = 0
        self.waste[:] = False
        for r, c in self.map.polluted:
            self.waste[r, c] = True

    def place(self, agents: Sequence) -> None:
        """Put each agent (position i of `agents`) on its Mesa cell."""
        cells = self.grid._cells
        for i, agent in enumerate(agents):
            agent.cell = cells[(int(self.pos[i, 0]), int(self.pos[i, 1]))]

    # ----- one step ------------------------------------------------------------------------------------
    def step(self, actions: Sequence[int], order: Sequence[int]) -> np.ndarray:
        """Apply `actions` (by agent position) in `order`; regrow; collect. Returns each agent's reward."""
        rules = self.rules
        rewards = np.zeros(self.n, dtype=np.float64)
        self.beamed = []
        self.fired[:] = 0
        self.cleaning[:] = 0
        self.cleaned = 0
        self.collected[:] = 0
        np.maximum(self.timeout - 1, 0, out=self.timeout)
        self.occupied = self._occupancy()
        for i in order:
            if self.timeout[i] > 0:
                continue
            a = actions[i]
            if a <= STEP_RIGHT:
                self._move(i, a)
            elif a == ROTATE_LEFT:
                self.orient[i] = (self.orient[i] - 1) % 4
            elif a == ROTATE_RIGHT:
                self.orient[i] = (self.orient[i] + 1) % 4
            elif a == BEAM:
                if rules.beam:
                    self._fire(i, rewards)
            elif a == CLEAN and rules.regrowth == "cleanup":
                self._clean(i, rewards)
        self._regrow()
        self._collect(rewards)
        return rewards

    def _move(self, i: int, action: int) -> None:
        fwd, right = FRAMES[int(self.orient[i])]
        dr, dc = (fwd if action == FORWARD else (-fwd[0], -fwd[1]) if action == BACKWARD
                  else (-right[0], -right[1]) if action == STEP_LEFT else right)
        r0, c0 = int(self.pos[i, 0]), int(self.pos[i, 1])
        r, c = r0 + dr, c0 + dc
        if 0 <= r < self.height and 0 <= c < self.width and not self.walls[r, c]:
            if self.rules.blocking:
                occupied = self.occupied
                if occupied[r, c]:
                    return
                occupied[r0, c0] -= 1
                occupied[r, c] += 1
            self.pos[i, 0], self.pos[i, 1] = r, c

    def beam_cells(self, i: int, orient: Optional[int] = None) -> list[tuple[int, int]]:
        """The cells agent i's beam covers facing `orient` (its own by default): each lane stops at a wall."""
        return beam_cells(self.walls, (int(self.pos[i, 0]), int(self.pos[i, 1])),
                          int(self.orient[i] if orient is None else orient), self.rules.beam_length, self.rules.beam_width)

    def in_beam(self, i: int, orient: Optional[int] = None) -> np.ndarray:
        """The other active agents agent i's beam would hit facing `orient` (positions, sorted)."""
        if self.n <= 1:
            return np.zeros(0, dtype=np.int64)
        fwd, right = FRAMES[int(self.orient[i] if orient is None else orient)]
        rel = self.pos - self.pos[i]
        ahead = rel[:, 0] * fwd[0] + rel[:, 1] * fwd[1]
        lane = rel[:, 0] * right[0] + rel[:, 1] * right[1]
        half = self.rules.beam_width // 2
        near = (ahead >= 1) & (ahead <= self.rules.beam_length) & (np.abs(lane) <= half) & (self.timeout == 0)
        near[i] = False
        hit = np.flatnonzero(near)
        if len(hit) == 0:
            return hit
        reach = {}  # lane -> cells it reaches before a wall
        keep = []
        for j in hit:
            ln = int(lane[j])
            if ln not in reach:
                reach[ln] = self._lane_reach(i, fwd, right, ln)
            if ahead[j] <= reach[ln]:
                keep.append(j)
        return np.array(keep, dtype=np.int64)

    def _lane_reach(self, i: int, fwd: tuple[int, int], right: tuple[int, int], lane: int) -> int:
        r0, c0 = int(self.pos[i, 0]), int(self.pos[i, 1])
        for dist in range(1, self.rules.beam_length + 1):
            r = r0 + fwd[0] * dist + right[0] * lane
            c = c0 + fwd[1] * dist + right[1] * lane
            if not (0 <= r < self.height and 0 <= c < self.width) or self.walls[r, c]:
                return dist - 1
        return self.rules.beam_length

    def _fire(self, i: int, rewards: np.ndarray) -> None:
        rules = self.rules
        self.fired[i] += 1
        rewards[i] -= rules.fire_cost
        for j in self.in_beam(i):
            self.hits[j] += 1
            rewards[j] -= rules.fire_penalty
            self.beamed.append((i, int(j)))
            if self.hits[j] >= rules.hits_to_tag:
                self.timeout[j] = rules.timeout_steps
                self.hits[j] = 0
                if rules.timeout_steps:  # out of the game: its cell is free
                    self.occupied[self.pos[j, 0], self.pos[j, 1]] -= 1

    def _clean(self, i: int, rewards: np.ndarray) -> None:
        self.cleaning[i] += 1
        rewards[i] -= self.rules.clean_cost
        for r, c in self.beam_cells(i):
            if self.waste[r, c]:
                self.waste[r, c] = False
                self.cleaned += 1

    # ----- regrowth ------------------------------------------------------------------------------------
    def waste_share(self) -> float:
        """The river's polluted share (0: clean; Cleanup only)."""
        if not len(self.river):
            return 0.0
        return float(self.waste[self.river[:, 0], self.river[:, 1]].sum()) / len(self.river)

    def apple_chance(self, share: float) -> float:
        """Cleanup: an empty apple cell's chance to grow this step at waste share `share`."""
        r = self.rules
        if share >= r.depletion:
            return 0.0
        if share <= r.restoration:
            return r.apple_respawn_prob
        return (1.0 - (share - r.restoration) / (r.depletion - r.restoration)) * r.apple_respawn_prob

    def river_waste(self) -> np.ndarray:
        """Whether each river cell is polluted, in the map's reading order of the river."""
        return self.waste[self.river[:, 0], self.river[:, 1]] if len(self.river) else np.zeros(0, dtype=bool)

    def alive_apples(self) -> np.ndarray:
        return self.apples[self.apple_pos[:, 0], self.apple_pos[:, 1]] if len(self.apple_pos) else np.zeros(0, dtype=bool)

    def _regrow(self) -> None:
        rules = self.rules
        if not len(self.apple_pos) and rules.regrowth != "cleanup":
            return
        if rules.regrowth == "fixed":
            dead = ~self.alive_apples()
            self.apple_timer[dead] -= 1
            back = dead & (self.apple_timer <= 0)
            self.apple_timer[back] = 0
            self.apples[self.apple_pos[back, 0], self.apple_pos[back, 1]] = True
        elif rules.regrowth == "density":
            alive = self.alive_apples()
            dead = np.flatnonzero(~alive)
            if not len(dead):
                return
            local = self.local_stock(alive).astype(np.int64)[dead]
            chance = np.where(local < len(_DENSITY), _DENSITY[np.minimum(local, len(_DENSITY) - 1)], 0.1)
            draws = self.rng.random(len(dead))
            back = dead[draws < chance]
            self.apples[self.apple_pos[back, 0], self.apple_pos[back, 1]] = True
        else:
            share = self.waste_share()
            if share < rules.depletion and self.rng.random() < rules.waste_spawn_prob:
                occupied = set(map(tuple, self.pos.tolist()))
                free = [k for k, (r, c) in enumerate(self.river.tolist()) if not self.waste[r, c] and (r, c) not in occupied]
                if free:
                    r, c = self.river[free[int(self.rng.integers(len(free)))]]
                    self.waste[r, c] = True
            chance = self.apple_chance(self.waste_share())
            if chance <= 0 or not len(self.apple_pos):
                return
            occupied_cells = np.zeros(self.walls.shape, dtype=bool)
            occupied_cells[self.pos[:, 0], self.pos[:, 1]] = True
            empty = np.flatnonzero(~self.alive_apples() & ~occupied_cells[self.apple_pos[:, 0], self.apple_pos[:, 1]])
            if not len(empty):
                return
            back = empty[self.rng.random(len(empty)) < chance]
            self.apples[self.apple_pos[back, 0], self.apple_pos[back, 1]] = True

    def local_stock(self, alive: Optional[np.ndarray] = None) -> np.ndarray:
        """Density regrowth: each apple point's other live apples within Chebyshev distance `density_radius` (as
        floats). A box sum over the map's cumulative sums: O(map) a step whatever the radius, read from the rules at
        every step (a fork may change the radius, or switch to density regrowth)."""
        alive = self.alive_apples() if alive is None else alive
        if not len(self.apple_pos):
            return np.zeros(0, dtype=np.float64)
        grid = np.zeros((self.height + 1, self.width + 1), dtype=np.int64)
        grid[self.apple_pos[:, 0] + 1, self.apple_pos[:, 1] + 1] = alive
        sums = grid.cumsum(axis=0).cumsum(axis=1)
        k = self.rules.density_radius
        r, c = self.apple_pos[:, 0], self.apple_pos[:, 1]
        r0, r1 = np.maximum(r - k, 0), np.minimum(r + k, self.height - 1) + 1
        c0, c1 = np.maximum(c - k, 0), np.minimum(c + k, self.width - 1) + 1
        box = sums[r1, c1] - sums[r0, c1] - sums[r1, c0] + sums[r0, c0]
        return (box - alive).astype(np.float64)

    def _collect(self, rewards: np.ndarray) -> None:
        apples, timeout, pos = self.apples, self.timeout, self.pos
        on = apples[pos[:, 0], pos[:, 1]] & (timeout == 0)
        if not on.any():
            return
        for i in np.flatnonzero(on):
            r, c = int(pos[i, 0]), int(pos[i, 1])
            if apples[r, c]:  # (an agent earlier in order took it)
                apples[r, c] = False
                self.apple_timer[self.apple_index[r, c]] = self.rules.respawn_time
                rewards[i] += 1.0
                self.collected[i] += 1

    def _occupancy(self) -> np.ndarray:
        """How many active agents hold each cell."""
        occupied = np.zeros(self.walls.shape, dtype=np.int32)
        active = self.timeout == 0
        np.add.at(occupied, (self.pos[active, 0], self.pos[active, 1]), 1)
        return occupied

    # ----- paths ---------------------------------------------------------------------------------------
    def _adjacency(self) -> list[tuple[int, ...]]:
        """For each flat cell index, its walkable neighbours in DIRS order."""
        h, w = self.walls.shape
        out: list[tuple[int, ...]] = []
        for r in range(h):
            for c in range(w):
                out.append(tuple((r + dr) * w + (c + dc) for dr, dc in DIRS
                                 if 0 <= r + dr < h and 0 <= c + dc < w and not self.walls[r + dr, c + dc]))
        return out

    def distance_field(self, targets: np.ndarray) -> np.ndarray:
        """Steps from every cell to the nearest cell where `targets` (bool (H, W)) holds; UNREACHABLE where none."""
        h, w = self.walls.shape
        dist = np.full(h * w, UNREACHABLE, dtype=np.int32)
        start = np.flatnonzero((targets & self.free).ravel())
        if not len(start):
            return dist.reshape(h, w)
        dist[start] = 0
        frontier = start.tolist()
        adjacent = self._adjacent
        d = 0
        seen = dist  # (alias: written as cells are reached)
        while frontier:
            d += 1
            nxt = []
            for x in frontier:
                for y in adjacent[x]:
                    if seen[y] == UNREACHABLE:
                        seen[y] = d
                        nxt.append(y)
            frontier = nxt
        return dist.reshape(h, w)

    def descend(self, field: np.ndarray, i: int) -> tuple[int, int]:
        """Agent i's step down `field` (a distance field): (0, 0) on a target or where nothing is reachable."""
        r, c = int(self.pos[i, 0]), int(self.pos[i, 1])
        here = field[r, c]
        if here == 0 or here == UNREACHABLE:
            return (0, 0)
        h, w = field.shape
        for dr, dc in DIRS:
            rr, cc = r + dr, c + dc
            if 0 <= rr < h and 0 <= cc < w and field[rr, cc] == here - 1:
                return (dr, dc)
        return (0, 0)


def bit_string(flags: np.ndarray) -> str:
    """One character a flag, '1' where it is set (non-zero) and '0' where not: a stored state's apples and waste, made
    in one pass over the array (the string `"".join("1" if f else "0" for f in flags)` is, byte for byte)."""
    return ((np.asarray(flags) != 0).astype(np.uint8) + 48).tobytes().decode("ascii")  # (48: the character '0')
