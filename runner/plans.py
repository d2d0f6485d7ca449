"""How a run starts and what happens to its ticks: the `RunPlan` that `execute` follows.

- `FreshRun`: a new row (a plain run, a replay of another run, a sweep's cell with its fixed id);
  every tick is stored.
- Both follow a run's config schedule: a fork runs under its parent's config up to its branch tick,
  then under its own (`config_schedule`), so a replay of a fork replays what the fork ran.
- `Continuation`: a resumed row or a new fork. Its first ticks are *replayed*: the Mesa model's
  state (its RNG, the world, the agents' memories) is not stored, so it is rebuilt by stepping the
  model again, scripted decisions recomputed from their seeds and LLM decisions answered by the
  cache only (`ReplayMode`). Each replayed tick is checked against the stored one
  (`sim.store.snapshots`) and not stored again; the first difference fails the run. Then the LLM
  goes live and the run continues, committing as usual. A fork copies its parent's rows when the
  replay reaches its branch tick and swaps in its changed config after it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional, Protocol

from sim.contracts.backend import ReplayMode
from sim.core.records import TickRecord
from sim.core.spec import RunSpec
from sim.store.snapshots import diff_ticks, snapshot_of
from sim.store.store import Store
from sim.store.tables import Run
from sim.tick.config import ScenarioConfig
from sim.tick.model import SocietyModel, reward_layer

#: the configs a run used: [(0, first config), (branch tick, config from the tick after it), ...]
Schedule = Sequence[tuple[int, dict[str, Any]]]


def config_schedule(store: Store, run: Run) -> list[tuple[int, dict[str, Any]]]:
    """The configs `run` used: [(0, first config), (branch tick, config after it), ...] along its fork lineage
    (a replay ran under the schedule of the run it replayed)."""
    config = run.spec["config"]
    if run.origin == "replay" and run.parent_id is not None:
        return config_schedule(store, store.get_run(run.parent_id))
    if run.origin != "fork" or run.parent_id is None:
        return [(0, config)]
    parent = store.get_run(run.parent_id)
    earlier = [(t, c) for t, c in config_schedule(store, parent) if t < (run.branch_tick or 0)]
    return earlier + [(run.branch_tick or 0, config)]


class _Configs:
    """A config schedule followed by a running model: the first config, then each later one after its tick."""

    def __init__(self, schedule: Optional[Schedule]) -> None:
        self.schedule = list(schedule or ())
        self.model: Optional[SocietyModel] = None

    def first(self, config: ScenarioConfig) -> ScenarioConfig:
        return type(config).model_validate(self.schedule[0][1]) if self.schedule else config

    def after(self, tick: int) -> None:
        """Swap in the config that starts after `tick`, if one does."""
        for at, config in self.schedule[1:]:
            if at == tick:
                swap_config(self.model, config)


class ReplayMismatch(RuntimeError):
    """A replayed tick differs from the stored one."""


class RunPlan(Protocol):
    """What `execute` asks of the way a run starts (fresh, resumed, forked, a sweep's cell)."""

    #: seconds the run ran before this process took it over (a resumed row), added to its duration
    earlier_duration: float
    #: bad input found before the first tick deletes the row (a new row: nothing was stored); a resumed or
    #: forked row, or a sweep's cell, is kept and marked failed instead
    drop_if_bad_input: bool

    def open(self, store: Store, spec: RunSpec, versions: dict[str, str], backends: str) -> str:
        """Create or claim the run's row; its id."""
        ...

    def first_config(self, config: ScenarioConfig) -> ScenarioConfig:
        """The config the model is built with (a fork's: its parent's first one)."""
        ...

    def attach(self, model: SocietyModel) -> None:
        """The model is built, before its first tick."""
        ...

    def commit(self, record: TickRecord) -> bool:
        """A tick is done: True to store it, False when it was a replayed tick (checked, not stored again)."""
        ...


class FreshRun:
    """A new run row; every tick stored. `run_id` fixes the row's id (a sweep's cells), else a new one;
    `schedule` (a replay of a fork) the configs to run under, else the spec's config throughout."""

    earlier_duration = 0.0

    def __init__(self, *, origin: str = "run", parent_id: Optional[str] = None, sweep_id: Optional[str] = None,
                 run_id: Optional[str] = None, drop_if_bad_input: bool = True, schedule: Optional[Schedule] = None) -> None:
        self.origin, self.parent_id, self.sweep_id, self.run_id = origin, parent_id, sweep_id, run_id
        self.drop_if_bad_input = drop_if_bad_input
        self.configs = _Configs(schedule)

    def open(self, store: Store, spec: RunSpec, versions: dict[str, str], backends: str) -> str:
        return store.create_run(spec, versions, origin=self.origin, parent_id=self.parent_id, sweep_id=self.sweep_id,
                                backends=backends, run_id=self.run_id)

    def first_config(self, config: ScenarioConfig) -> ScenarioConfig:
        return self.configs.first(config)

    def attach(self, model: SocietyModel) -> None:
        self.configs.model = model
        self.configs.after(0)

    def commit(self, record: TickRecord) -> bool:
        self.configs.after(record.tick)
        return True


class Continuation:
    """Replays ticks 1..`replay_until` (checked against `source_id`'s stored ticks), then goes live.

    `schedule` lists the configs: the first is used from tick 1, each later (tick, config) is swapped
    in after that tick. A resume claims `run` (its own row); a fork creates a row for the fork of
    `fork_of` at `branch_tick` and copies the parent's rows when the replay reaches it. `replay` is
    the switch the run's LLM backend was built with: it is finished when the replay is.
    """

    def __init__(self, *, schedule: Schedule, replay_until: int, source_id: str, replay: ReplayMode,
                 run: Optional[Run] = None, fork_of: Optional[Run] = None, branch_tick: Optional[int] = None,
                 sweep_id: Optional[str] = None) -> None:
        self.configs = _Configs(schedule)
        self.replay_until = replay_until
        self.source_id = source_id
        self.replay = replay
        self.run = run  # resume: the row to claim
        self.fork_of = fork_of
        self.branch_tick = branch_tick
        self.sweep_id = sweep_id
        self.earlier_duration = run.duration_s if run is not None else 0.0
        self.drop_if_bad_input = run is None  # a fork's new row goes; a resumed row is the run's own: kept
        self.store: Optional[Store] = None
        self.run_id = ""
        self.replayed = 0

    def open(self, store: Store, spec: RunSpec, versions: dict[str, str], backends: str) -> str:
        self.store = store
        if self.run is not None:
            self.run_id = store.claim(self.run)
        else:
            self.run_id = store.create_run(spec, versions, origin="fork", parent_id=self.fork_of.id,
                                           branch_tick=self.branch_tick, backends=backends, sweep_id=self.sweep_id)
        return self.run_id

    def first_config(self, config: ScenarioConfig) -> ScenarioConfig:
        return self.configs.first(config)

    def attach(self, model: SocietyModel) -> None:
        self.configs.model = model
        if self.replay_until == 0:
            self.replay.finish()
        self.configs.after(0)

    def commit(self, record: TickRecord) -> bool:
        tick = record.tick
        if tick > self.replay_until:
            self.configs.after(tick)
            return True
        problem = diff_ticks(self.store.tick_snapshots(self.source_id, tick).get(tick), snapshot_of(record))
        if problem:
            raise ReplayMismatch(f"replay of tick {tick} does not match the stored run {self.source_id}: {problem}")
        self.replayed = tick
        if self.fork_of is not None and tick == self.branch_tick:
            self.store.copy_ticks(self.fork_of.id, self.run_id, tick)
        if tick == self.replay_until:
            self.replay.finish()
        self.configs.after(tick)
        return False


def swap_config(model: SocietyModel, data: dict[str, Any]) -> None:
    """Give a running model its new config (after a tick); the reward layer is rebuilt from it."""
    config = type(model.config).model_validate(data)
    model.config = config
    model.reward_layer = reward_layer(config)
