"""A sweep as one DataFrame (one row per run), its cells with mean and 95% CI, and fork-vs-parent comparisons."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Optional

import pandas as pd

from analysis.model_usage import Prices, runs_cost
from sim.reward.intervals import is_rate, mean_interval
from sim.core.errors import UsageError
from sim.store.store import Store
from sim.store.tables import Run

ENDED = ("finished", "collapsed")


def _lookup(config: dict[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return json.dumps(node, sort_keys=True) if isinstance(node, (dict, list)) else node


def sweep_frame(store: Store, sweep_id: str, prices: Optional[Prices] = None) -> tuple[pd.DataFrame, list[str]]:
    """One row per run of the sweep: run_id, status, seed, each grid key's value, every final metric, and `cost`
    where some run called an LLM (what its models' tokens cost under `prices`: analysis.model_usage).

    Returns (frame, grid keys). Runs that have not ended have empty metrics.
    """
    row = store.get_sweep(sweep_id)
    keys = list(row.definition.get("grid", {}))
    runs = store.sweep_runs(row.id)
    costs = runs_cost(store, [r.id for r in runs], prices)  # (only runs that called an LLM)
    records = []
    for r in runs:
        config = r.spec.get("config", {})
        rec: dict[str, Any] = {"run_id": r.id, "status": r.status, "seed": r.seed, "ticks": r.ticks}
        rec.update({k: _lookup({**config, "llm": r.spec.get("llm", {})}, k) for k in keys})
        rec.update(r.final_metrics if r.status in ENDED else {})
        if costs:
            rec["cost"] = costs.get(r.id, 0.0)
        records.append(rec)
    frame = pd.DataFrame(records, columns=None if records else ["run_id", "status", "seed", "ticks", *keys])
    frame.attrs["sweep_id"] = row.id
    frame.attrs["metrics"] = [c for c in frame.columns if c not in ("run_id", "status", "seed", "ticks", *keys)]
    return frame, keys


def cell_table(frame: pd.DataFrame, keys: Sequence[str], metrics: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """Per cell (grid combination), over the runs that ended: n, and `<metric>_mean/_lo/_hi` (the 95% interval of
    `sim.reward.intervals.mean_interval`: Wilson for a rate's 0/1 values, else a percentile bootstrap of the mean).

    A cell with one run has no interval (lo/hi NaN); a metric that is null in every run is NaN.
    """
    metrics = list(metrics if metrics is not None else frame.attrs.get("metrics", []))
    missing = [m for m in metrics if m not in frame.columns]
    if missing:
        valid = ", ".join(frame.attrs.get("metrics", [])) or "(no run has ended yet)"
        raise UsageError(f"unknown metric {missing[0]!r}; valid: {valid}")
    ended = frame[frame["status"].isin(ENDED)] if len(frame) else frame
    groups = ended.groupby(list(keys), dropna=False, sort=True) if keys else [((), ended)]
    rows = []
    for cell, part in groups:
        cell = cell if isinstance(cell, tuple) else (cell,)
        row: dict[str, Any] = dict(zip(keys, cell))
        row["n"] = len(part)
        for m in metrics:
            ci = mean_interval(pd.to_numeric(part[m], errors="coerce").tolist(), rate=is_rate(m))
            row.update({f"{m}_{k}": math.nan if ci[k] is None else ci[k] for k in ("mean", "lo", "hi")})
        rows.append(row)
    return pd.DataFrame(rows, columns=[*keys, "n"] + [f"{m}_{s}" for m in metrics for s in ("mean", "lo", "hi")])


def compare_runs(store: Store, run_id: str) -> dict[str, Any]:
    """A fork (or replay) and its parent side by side: changed config, per-tick metrics, final metrics."""
    run = store.get_run(run_id)
    if not run.parent_id:
        raise UsageError(f"run {run.id} has no parent (origin {run.origin}); --compare-parent needs a fork or a replay")
    parent: Run = store.get_run(run.parent_id)
    a, b = parent.spec.get("config", {}), run.spec.get("config", {})
    changed = {k: f"{a.get(k)} -> {b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
    pt = {t.tick: t.metrics for t in store.ticks(parent.id)}
    ft = {t.tick: t.metrics for t in store.ticks(run.id)}
    names = list(next(iter(ft.values()), None) or next(iter(pt.values()), None) or {})
    return {
        "run_id": run.id, "parent_id": parent.id, "branch_tick": run.branch_tick, "origin": run.origin,
        "changed": changed, "metrics": names,
        "ticks": [{"tick": t, "parent": pt.get(t, {}), "fork": ft.get(t, {})} for t in sorted(set(pt) | set(ft))],
        "final": {"parent": parent.final_metrics, "fork": run.final_metrics},
        "status": {"parent": parent.status, "fork": run.status},
    }
