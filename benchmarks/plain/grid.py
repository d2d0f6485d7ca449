"""The grid games (scenarios/grid: Gathering, Cleanup) in plain Mesa, on the same map and rules.

Each step every agent that is not tagged out picks an action (`greedy`: one step down the distance field to the
nearest live apple, the field computed once per step for everyone), the actions apply in a random order, apples
regrow (or, in Cleanup, waste spawns and apples grow with the river's cleanliness) and agents on live apples take
them. Each episode starts the world afresh. Reported each step: apples collected, apples alive, beams fired.

The world's rules are the scenario's `GridWorld` (a Mesa `OrthogonalVonNeumannGrid` with property layers: what a
Mesa user writes a grid game on); the agents, their choice and the step are written here. Its draws (spawns,
orientations, regrowth, the order agents act in) come from the model's RNGs in the engine's order, so it
reproduces the engine's run.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Optional

import mesa
import numpy as np
from mesa.discrete_space import CellAgent

from scenarios.grid import maps as grid_maps
from scenarios.grid.maps import GridMap
from scenarios.grid.config import CleanupConfig, GatheringConfig
from scenarios.grid.world import STAND, GridWorld, Rules, move


class Forager(CellAgent):
    """An agent on the grid: its position in the world's arrays."""

    def __init__(self, model: "PlainGrid", index: int, strategy: str) -> None:
        super().__init__(model)
        self.index, self.strategy = index, strategy

    def choose(self) -> None:
        m, i = self.model, self.index
        w = m.world
        if self.strategy == "greedy":
            m.actions[i] = move(w.descend(m.apple_field(), i), int(w.orient[i]))
        else:
            m.actions[i] = STAND
        m.order.append(i)


class PlainGrid(mesa.Model):
    """N foragers on a grid map, episodes of `episode_steps` steps."""

    def __init__(self, n: int, *, seed: int, grid_map: GridMap, rules: Rules, episode_steps: int = 1000,
                 strategy: str = "greedy") -> None:
        super().__init__(seed=seed)
        self.world = GridWorld(grid_map, rules, n, self.rng, self.random)
        self.foragers = [Forager(self, i, strategy) for i in range(n)]
        self.episode_steps = episode_steps
        self.metrics: dict[str, float] = {}
        self._field: Optional[np.ndarray] = None

    def apple_field(self) -> np.ndarray:
        """Each cell's distance to the nearest live apple, once per step."""
        if self._field is None:
            self._field = self.world.distance_field(self.world.apples)
        return self._field

    def step(self) -> None:
        w = self.world
        if (self.steps - 1) % self.episode_steps == 0:
            w.reset()
            w.place(self.foragers)
        self._field = None
        self.actions = [STAND] * len(self.foragers)
        self.order: list[int] = []
        active = [a for a in self.foragers if w.timeout[a.index] == 0]
        mesa.agent.AgentSet(active, random=self.random).shuffle_do("choose")
        w.step(self.actions, self.order)
        w.place(self.foragers)
        self.metrics = {"collected": float(w.collected.sum()), "apples": float(w.alive_apples().sum()),
                        "beams": float(w.fired.sum()), "tagged": float((w.timeout > 0).sum())}


def _pair(game: str, n: int, steps: int, **extra: Any) -> tuple[list[str], Callable[[int], PlainGrid], int]:
    """The engine's `--set`s and the plain model for one of the grid games (its config's defaults otherwise)."""
    fields = {"agents": n, "steps": steps, "strategy": "greedy", **extra}
    sets = [f"{k}={v}" for k, v in fields.items()]
    config = (CleanupConfig if game == "cleanup" else GatheringConfig).model_validate(fields)
    grid_map = grid_maps.load(config.map, grid_maps.CLEANUP_MAPS if game == "cleanup" else grid_maps.GATHERING_MAPS)
    rules = rules_of(config, game)
    return sets, lambda seed: PlainGrid(n, seed=seed, grid_map=grid_map, rules=rules, episode_steps=config.episode_steps), steps


def rules_of(config: Any, game: str) -> Rules:
    """The rules a grid game's config sets (as the scenario's model reads them)."""
    c = config
    own = ({"regrowth": "cleanup", "fire_cost": c.fire_cost, "fire_penalty": c.fire_penalty, "clean_cost": c.clean_cost,
            "depletion": c.depletion, "restoration": c.restoration, "waste_spawn_prob": c.waste_spawn_prob,
            "apple_respawn_prob": c.apple_respawn_prob} if game == "cleanup"
           else {"regrowth": c.regrowth, "respawn_time": c.respawn_time, "density_radius": c.density_radius})
    return Rules(beam_length=c.beam_length, beam_width=c.beam_width, hits_to_tag=c.hits_to_tag,
                 timeout_steps=c.timeout_steps, beam=c.beam, **own)


class Gathering:
    """The Gathering pair."""

    SCENARIO = "gathering"

    @staticmethod
    def timing(n: int = 10, steps: int = 300) -> tuple[list[str], Callable[[int], PlainGrid], int]:
        """The timed pair: n greedy foragers on the large map, `steps` steps."""
        return _pair("gathering", n, steps)

    @staticmethod
    def check() -> tuple[list[str], Callable[[int], PlainGrid], int, dict[str, str]]:
        """The pair that must agree: 6 greedy foragers on the small map over two short episodes (density regrowth)."""
        sets, plain, steps = _pair("gathering", 6, 60, map="small", episode_steps=30, iterations=2, regrowth="density")
        return sets, plain, steps, {k: k for k in ("collected", "apples", "beams", "tagged")}


class Cleanup:
    """The Cleanup pair."""

    SCENARIO = "cleanup"

    @staticmethod
    def timing(n: int = 5, steps: int = 300) -> tuple[list[str], Callable[[int], PlainGrid], int]:
        """The timed pair: n greedy foragers on the default map, `steps` steps."""
        return _pair("cleanup", n, steps)

    @staticmethod
    def check() -> tuple[list[str], Callable[[int], PlainGrid], int, dict[str, str]]:
        """The pair that must agree: 5 greedy foragers, 80 steps (waste spawns, apples grow by the river's state)."""
        sets, plain, steps = _pair("cleanup", 5, 80)
        return sets, plain, steps, {k: k for k in ("collected", "apples", "beams", "tagged")}
