"""How far a sweep has got: its runs by status, out of its total (`societas sweep-status`).

Reads the store only: no sweep file, no scenario, no model (it answers at once on any store).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sim.store.liveness import liveness

if TYPE_CHECKING:  # pragma: no cover - for type checkers
    from sim.store.store import Store


def status(store: Store, sid: str) -> dict[str, Any]:
    """Runs by status (`stale`: marked running but its process is gone), out of the sweep's total."""
    row = store.get_sweep(sid)
    runs = store.sweep_runs(row.id)
    counts: dict[str, int] = {}
    for r in runs:
        key = "stale" if liveness(r) == "stale" else r.status
        counts[key] = counts.get(key, 0) + 1
    failures = [{"run_id": r.id, "status": r.status, "reason": r.reason} for r in runs if r.status == "failed"]
    return {"sweep_id": row.id, "scenario": row.scenario, "source": row.source, "total": row.total,
            "statuses": counts, "pending": row.total - len(runs), "grid": row.definition.get("grid", {}),
            "seeds": len(row.definition.get("seeds", [])), "failures": failures}
