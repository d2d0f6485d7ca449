"""Replay a stored run from the LLM cache (no model) and compare it, tick by tick, with the original."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from scenarios.registry import get_scenario
from sim.core.backend import Backend, ReplayMode
from sim.core.spec import RunSpec
from sim.runner.backends import make_backends
from sim.runner.config import validate_config
from sim.runner.data import DATA_KEY, changed_data
from sim.runner.execution import RunFailed, execute
from sim.runner.plans import FreshRun, config_schedule
from sim.runner.probing import refuse_probe_run
from sim.store.snapshots import diff_ticks
from sim.store.store import Store


def replay_run(store: Store, run_id: str, *, backends: Optional[Mapping[str, Backend]] = None) -> dict[str, Any]:
    """Re-run `run_id`'s spec with a cache-only LLM backend; report whether every stored tick matched.

    The replay is stored as a run of its own (origin `replay`, its parent the original); a fork is replayed
    under its parent's config up to its branch tick, as it ran. Ticks are
    compared as resume compares them (`sim.store.snapshots`: metrics, state, every agent step, every
    event). An unfinished original (failed, interrupted, killed) is replayed only for the ticks it
    stored, and the report says it was incomplete: its missing ticks are not mismatches. `backends`
    replaces those the spec names (a run made with backends of its own); their LLM answers must come
    from the cache.
    """
    original = store.get_run(run_id)
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
    if backends is None:
        backends = make_backends(spec, cls, store, replay=ReplayMode())
    try:
        plan = FreshRun(origin="replay", parent_id=run_id, schedule=config_schedule(store, original))
        result = execute(spec, store, plan, backends=backends, stop_after=None if finished else original.ticks)
        replay_id, error = result.run_id, None
    except RunFailed as exc:
        replay_id, error = exc.run_id, exc.reason
    mismatches, compared, last = [], 0, 0
    a, b = store.iter_tick_snapshots(run_id), store.iter_tick_snapshots(replay_id)  # streamed: one tick in memory
    x, y = next(a, None), next(b, None)
    while x is not None or y is not None:
        if y is None or (x is not None and x[0] < y[0]):
            mismatches.append({"tick": x[0], "what": "missing in replay"})
            compared, x = compared + 1, next(a, None)
        elif x is None or y[0] < x[0]:
            mismatches.append({"tick": y[0], "what": "extra in replay"})
            last, y = y[0], next(b, None)
        else:
            problem = diff_ticks(x[1], y[1])
            if problem:
                mismatches.append({"tick": x[0], "what": problem})
            compared, last = compared + 1, y[0]
            x, y = next(a, None), next(b, None)
    if error:
        mismatches.append({"tick": last + 1, "what": error})
    replayed = store.get_run(replay_id)
    same_end = replayed.status == original.status if finished else replayed.status in ("stopped", "collapsed")
    return {"run_id": run_id, "replay_run_id": replay_id, "ticks": compared, "matched": not mismatches and same_end,
            "mismatches": mismatches, "incomplete": incomplete}
