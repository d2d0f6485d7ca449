"""Replay a stored run from the LLM cache (no model) and compare it, tick by tick, with the original; stored only on
request (`keep`, `societas replay --store`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from runner.backends import make_backends
from runner.config import validate_config
from runner.data import DATA_KEY, changed_data
from runner.execution import RunFailed, execute
from runner.plans import FreshRun, Schedule, config_schedule
from runner.probing import refuse_probe_run
from runner.studies import ORIGINS as STUDY_ORIGINS
from runner.studies import replay_study
from scenarios.registry import get_scenario
from sim.contracts.backend import Backend, ReplayMode
from sim.core.records import TickRecord
from sim.core.spec import RunSpec
from sim.store.dry import DryStore
from sim.store.snapshots import TickSnapshot, diff_ticks, snapshot_of
from sim.store.store import Store


def replay_run(store: Store, run_id: str, *, backends: Optional[Mapping[str, Backend]] = None,
               keep: bool = False) -> dict[str, Any]:
    """Re-run `run_id`'s spec with a cache-only LLM backend; report whether every stored tick matched.

    Ticks are compared as resume compares them (`sim.store.snapshots`: metrics, state, every agent step, every
    event), each as it is made, so memory holds one tick. Nothing is written unless `keep`: the replay runs against
    a `DryStore` (the store is left as it was); with `keep` it is stored as a run of its own (origin `replay`, its
    parent the original) and the report names it. A fork is replayed under its parent's config up to its branch
    tick, as it ran. An unfinished original (failed, interrupted, killed) is replayed only for the ticks it stored,
    and the report says it was incomplete: its missing ticks are not mismatches. `backends` replaces those the spec
    names (a run made with backends of its own); their LLM answers must come from the cache.
    """
    original = store.get_run(run_id)
    if original.origin in STUDY_ORIGINS:  # an interview or survey: asked again from the cache, answers compared
        return replay_study(store, original)
    refuse_probe_run(original, "replay")
    spec = RunSpec.model_validate(original.spec)
    finished = original.status in ("finished", "collapsed")
    incomplete = None if finished else f"{original.status}{': ' + original.reason if original.reason else ''}, {original.ticks} ticks stored"
    if not finished and original.ticks == 0:
        return {"run_id": run_id, "replay_run_id": None, "ticks": 0, "matched": True, "mismatches": [],
                "incomplete": incomplete}
    cls = get_scenario(spec.scenario)
    changed = changed_data((original.versions or {}).get(DATA_KEY), validate_config(cls.Config, original.spec["config"]))
    if changed:  # it could not be faithful: said, not run
        return {"run_id": run_id, "replay_run_id": None, "ticks": original.ticks, "matched": False,
                "mismatches": [{"tick": 0, "what": changed}], "incomplete": incomplete}
    target = store if keep else DryStore(store)
    if backends is None:
        backends = make_backends(spec, cls, target, replay=ReplayMode())
    compare = _Comparison(store, run_id)
    schedule = config_schedule(store, original)
    plan = (FreshRun(origin="replay", parent_id=run_id, schedule=schedule) if keep
            else _Unstored(schedule))
    status, error, replay_id = None, None, None
    try:
        result = execute(spec, target, plan, backends=backends, stop_after=None if finished else original.ticks,
                         progress=(lambda tick, total, record: compare.tick(record)) if not keep else None)
        status, replay_id = result.status, result.run_id if keep else None
    except RunFailed as exc:
        error, replay_id = exc.reason, exc.run_id if keep else None
    if keep:  # compared from the store, both runs streamed
        compare.stored(replay_id)
    compare.rest()
    mismatches = compare.mismatches
    if error:
        mismatches.append({"tick": compare.last + 1, "what": error})
    if keep and replay_id is not None:
        status = store.get_run(replay_id).status
    same_end = status == original.status if finished else status in ("stopped", "collapsed")
    return {"run_id": run_id, "replay_run_id": replay_id, "ticks": compare.compared,
            "matched": not mismatches and same_end, "mismatches": mismatches, "incomplete": incomplete}


class _Comparison:
    """The original's stored ticks, read as a stream, against the replay's: each tick is compared as it comes."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.original = store.iter_tick_snapshots(run_id)  # streamed: one tick in memory
        self.store = store
        self.next = next(self.original, None)
        self.mismatches: list[dict[str, Any]] = []
        self.compared = 0
        self.last = 0

    def tick(self, record: TickRecord) -> None:
        """The replay made `record`: compare it with the original's tick of the same number."""
        self.snapshot(record.tick, snapshot_of(record))

    def snapshot(self, tick: int, snap: TickSnapshot) -> None:
        while self.next is not None and self.next[0] < tick:
            self.mismatches.append({"tick": self.next[0], "what": "missing in replay"})
            self.compared += 1
            self.next = next(self.original, None)
        if self.next is None or self.next[0] > tick:
            self.mismatches.append({"tick": tick, "what": "extra in replay"})
            self.last = tick
            return
        problem = diff_ticks(self.next[1], snap)
        if problem:
            self.mismatches.append({"tick": tick, "what": problem})
        self.compared, self.last = self.compared + 1, tick
        self.next = next(self.original, None)

    def stored(self, replay_id: Optional[str]) -> None:
        """Compare a stored replay's ticks (`keep`)."""
        if replay_id is not None:
            for tick, snap in self.store.iter_tick_snapshots(replay_id):
                self.snapshot(tick, snap)

    def rest(self) -> None:
        """The original's ticks the replay never reached."""
        while self.next is not None:
            self.mismatches.append({"tick": self.next[0], "what": "missing in replay"})
            self.compared += 1
            self.next = next(self.original, None)


class _Unstored(FreshRun):
    """A replay that is not stored: no row, no tick stored (each is compared as it is made, by the progress hook)."""

    def __init__(self, schedule: Schedule) -> None:
        super().__init__(origin="replay", schedule=schedule, drop_if_bad_input=False)

    def open(self, store: Any, spec: RunSpec, versions: dict[str, str], backends: str) -> str:
        return "(not stored)"

    def commit(self, record: TickRecord) -> bool:
        super().commit(record)
        return False
