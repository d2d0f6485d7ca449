"""What is left of a sweep: its runs still to do (new, or to resume), those done before, those busy elsewhere.

Running the same file again finds its runs by their ids: it skips those that ended (finished or
collapsed), resumes those that failed or were killed, and leaves alone those still running in a
live process.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Optional

from runner.sweeps.spec import expand, run_id_for, sweep_id
from sim.core.profiles import CONTRACT
from sim.store.liveness import owner_alive
from sim.store.store import Store
from sim.store.tables import SweepRow, utc_now

#: statuses of a run that will not change: a sweep skips them
ENDED = ("finished", "collapsed")


@dataclass
class SweepBacklog:
    """A sweep's work: `todo` holds (run id, "new" | "resume", spec as JSON) for each run still to do."""

    sweep_id: str
    total: int
    todo: list[tuple[str, Literal["new", "resume"], dict[str, Any]]] = field(default_factory=list)
    done_before: int = 0
    busy: int = 0  # running in a live process elsewhere
    url: str = ""


def prepare(store: Store, definition: dict[str, Any], source: Optional[str] = None) -> SweepBacklog:
    """Record the sweep (once) and list the runs still to do.

    A sweep keeps the decision contract it started under (recorded with it; none recorded: 1), so that
    its runs stay comparable and keep their ids.
    """
    sid = sweep_id(definition)
    row = store.sweep_row(sid)
    contract = CONTRACT if row is None else int((row.definition or {}).get("contract", 1))
    specs = expand(definition, contract=contract)
    now = utc_now()
    store.save_sweep(SweepRow(id=sid, scenario=definition["scenario"], definition={**definition, "contract": contract},
                              total=len(specs), source=source, created_at=now, updated_at=now))
    existing = {r.id: r for r in store.sweep_runs(sid)}
    backlog = SweepBacklog(sid, len(specs), url=store.url)
    for spec in specs:
        rid = run_id_for(sid, spec)
        run = existing.get(rid)
        if run is None:
            backlog.todo.append((rid, "new", spec.model_dump(mode="json")))
        elif run.status in ENDED:
            backlog.done_before += 1
        elif run.status == "running" and owner_alive(run):
            backlog.busy += 1
        else:
            backlog.todo.append((rid, "resume", spec.model_dump(mode="json")))
    return backlog
