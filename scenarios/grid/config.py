"""The grid games' settings (Gathering, Cleanup): what `--set key=value` may change, checked before anything runs.

Kept apart from the model so that reading a stored run's config (`societas show`) loads no Mesa.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal, Optional

from pydantic import Field, model_validator

from scenarios.grid import maps as grid_maps
from sim.core.errors import UsageError
from sim.tick.config import ScenarioConfig

StrategyName = Literal["random", "greedy", "exploitative", "cooperative"]
#: the synthesis phases that send a refused program back with its problems (code_retries picks how many)
FIXES = tuple(f"fix{k}" for k in range(1, 6))


class GridConfig(ScenarioConfig):
    """What both grid games share; every field can be set with `--set key=value`."""

    count_field: ClassVar[str] = "agents"
    path_fields: ClassVar[tuple[str, ...]] = ("map", "seed_code")
    #: the game's built-in maps by name (a `map` that is none of them is a path to a map file)
    maps: ClassVar[dict[str, str]] = {}

    agents: int = Field(10, ge=1, le=10_000, description="number of agents")
    map: str = Field("large", min_length=1, description="a built-in map (see the scenario's docs) or a path to an ASCII map file")
    episode_steps: int = Field(1000, ge=1, le=1_000_000, description="steps per episode (the papers': 1000)")
    iterations: int = Field(1, ge=1, le=100, description="episodes; under --policy synthesis, the versions of the code the LLM writes")
    steps: Optional[int] = Field(None, ge=1, le=100_000_000, description="ticks to run (one tick = one step of every agent); default episode_steps x iterations, less stops early")
    strategy: StrategyName = Field("greedy", description="scripted strategy of the agents")
    beam: bool = Field(True, description="the tagging beam works (false: the beam action does nothing)")
    beam_length: int = Field(20, ge=1, le=1000, description="cells a beam reaches ahead")
    beam_width: int = Field(1, ge=1, le=99, description="lanes a beam covers (odd: centred on the agent)")
    hits_to_tag: int = Field(2, ge=1, le=100, description="beam hits that tag an agent out")
    timeout_steps: int = Field(25, ge=0, le=100_000, description="steps a tagged agent is out")
    code_tokens: int = Field(512, ge=16, le=8192, description="synthesis: tokens the LLM may write per program")
    code_retries: int = Field(2, ge=0, le=len(FIXES), description="synthesis: times a refused program is sent back with its problems")
    step_timeout: float = Field(2.0, gt=0, le=600, description="synthesis: wall seconds one step's calls of the program may take (then it is stopped)")
    cpu_limit: int = Field(120, ge=1, le=86_400, description="synthesis: CPU seconds the program may use in an episode")
    memory_limit: int = Field(512, ge=64, le=65_536, description="synthesis: MB of address space the program's process may use")
    sandbox: Literal["bubblewrap", "landlock", "process"] = Field(
        "bubblewrap", description="synthesis: the isolation the program runs under: bubblewrap (full; the default), or "
                                  "by name a weaker level, landlock or process (README, Sandbox, says what each guarantees)")
    seed_code: Optional[str] = Field(None, min_length=1, description="synthesis: a Python file whose policy is the first version (the LLM writes the later ones)")

    @model_validator(mode="after")
    def _check(self) -> "GridConfig":
        full = self.episode_steps * self.iterations
        if self.steps is None:
            object.__setattr__(self, "steps", full)
        elif self.steps > full:
            raise ValueError(f"steps ({self.steps}) must be at most episode_steps x iterations = {full}")
        if self.beam_width % 2 == 0:
            raise ValueError(f"beam_width must be odd (a beam is centred on its agent), got {self.beam_width}")
        if self.seed_code is not None and not Path(self.seed_code).is_file():
            raise ValueError(f"seed_code {self.seed_code!r} is not a file (a Python file defining policy(obs))")
        if self.maps:  # the map is read here, so that a bad one is refused before anything runs (a sweep's cells too)
            try:
                grid_map = grid_maps.load(self.map, self.maps)
            except UsageError as exc:
                raise ValueError(str(exc)) from None
            if self.agents > grid_map.start_cells:
                raise ValueError(f"agents ({self.agents}) must be at most the map's {grid_map.start_cells} start cells "
                                 "(spawn points and open cells: an agent starts on a cell of its own)")
        return self

    def data_paths(self) -> dict[str, Path]:
        out = {}
        if self.seed_code:
            out["seed_code"] = Path(self.seed_code)
        if Path(self.map).is_file():
            out["map"] = Path(self.map)
        return out


class GatheringConfig(GridConfig):
    """Gathering (Leibo et al. 2017); `regrowth: density` gives Perolat et al.'s Commons."""

    maps: ClassVar[dict[str, str]] = grid_maps.GATHERING_MAPS

    regrowth: Literal["fixed", "density"] = Field("fixed", description="fixed: an apple regrows respawn_time steps after it is taken; density: by the live apples near it (Perolat's Commons)")
    respawn_time: int = Field(25, ge=1, le=100_000, description="fixed regrowth: steps until a taken apple is back")
    density_radius: int = Field(2, ge=1, le=50, description="density regrowth: Chebyshev radius of the apples counted")


class CleanupConfig(GridConfig):
    """Cleanup (Hughes et al. 2018): apples grow only while the river is clean enough."""

    maps: ClassVar[dict[str, str]] = grid_maps.CLEANUP_MAPS

    map: str = Field("default", min_length=1, description="a built-in map (see the scenario's docs) or a path to an ASCII map file")
    agents: int = Field(5, ge=1, le=10_000, description="number of agents")
    beam_length: int = Field(5, ge=1, le=1000, description="cells the penalty and cleaning beams reach ahead")
    beam_width: int = Field(3, ge=1, le=99, description="lanes the beams cover (odd: centred on the agent)")
    hits_to_tag: int = Field(1, ge=1, le=100, description="penalty-beam hits that tag an agent out")
    fire_cost: float = Field(1.0, ge=0, le=1e6, description="reward the firer of a penalty beam pays")
    fire_penalty: float = Field(50.0, ge=0, le=1e6, description="reward each agent hit by a penalty beam loses")
    clean_cost: float = Field(1.0, ge=0, le=1e6, description="reward the firer of a cleaning beam pays")
    depletion: float = Field(0.4, gt=0, le=1, description="waste share of the river at which apples (and new waste) stop")
    restoration: float = Field(0.0, ge=0, lt=1, description="waste share at or below which apples grow at apple_respawn_prob")
    waste_spawn_prob: float = Field(0.5, ge=0, le=1, description="chance a step adds one waste cell (below depletion)")
    apple_respawn_prob: float = Field(0.05, ge=0, le=1, description="chance an empty apple cell grows per step in a clean river")

    @model_validator(mode="after")
    def _thresholds(self) -> "CleanupConfig":
        if self.restoration >= self.depletion:
            raise ValueError(f"restoration ({self.restoration:g}) must be below depletion ({self.depletion:g})")
        return self
