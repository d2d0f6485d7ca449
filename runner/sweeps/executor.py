"""Run what is left of a sweep on the chosen executor (`local` process pool or `ray`), and report how it went."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Optional

from runner.limits import EXECUTORS
from runner.sweeps.backlog import SweepBacklog
from runner.sweeps.local import run_local
from runner.sweeps.ray_tasks import run_on_ray
from runner.sweeps.worker import Outcome
from sim.core.errors import UsageError
from sim.store.store import Store

Progress = Callable[[int, Outcome], None]


def run_sweep(store: Store, backlog: SweepBacklog, *, executor: str = "local", address: Optional[str] = None,
              workers: Optional[int] = None, progress: Optional[Progress] = None) -> dict[str, Any]:
    """Run what is left of a sweep; returns a report (counts, statuses, runs per second)."""
    if executor not in EXECUTORS:
        raise UsageError(f"bad value for '--executor': {executor!r}; valid: {', '.join(EXECUTORS)}")
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    done = backlog.done_before
    extra: dict[str, Any] = {}

    def record(outcome: Outcome) -> None:
        nonlocal done
        outcomes.append(outcome)
        done += 1
        if progress is not None:
            progress(done, outcome)

    if backlog.todo:
        if executor == "ray":
            extra = run_on_ray(backlog, address=address, workers=workers, on_done=record)
        else:
            run_local(store, backlog, workers=workers, on_done=record)
    seconds = time.perf_counter() - started
    statuses: dict[str, int] = {}
    for o in outcomes:
        statuses[o.status] = statuses.get(o.status, 0) + 1
    failed = [o for o in outcomes if o.status in ("failed", "error")]
    ran = [o for o in outcomes if o.status != "taken"]  # taken: another process running this sweep had it first
    return {"sweep_id": backlog.sweep_id, "total": backlog.total, "ran": len(ran), "skipped": backlog.done_before,
            "busy_elsewhere": backlog.busy, "taken": len(outcomes) - len(ran), "statuses": statuses,
            "failed": len(failed), "seconds": round(seconds, 3),
            "runs_per_s": len(ran) / seconds if seconds > 0 and ran else 0.0,
            "errors": [o.to_json() for o in failed][:20], **extra}
