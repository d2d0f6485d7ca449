"""Stored runs as pandas DataFrames, and export to CSV or Parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from sim.store import Store

TABLES = ("runs", "ticks", "agent_steps", "events", "llm_calls")


def _flat(row: dict, json_cols: tuple[str, ...]) -> dict:
    out = {}
    for k, v in row.items():
        if k in json_cols and isinstance(v, dict) and k == "metrics":
            out.update({f"metric_{mk}": mv for mk, mv in v.items()})
        elif isinstance(v, (dict, list)):
            out[k] = json.dumps(v)
        else:
            out[k] = v
    return out


def run_frames(store: Store, run_id: str) -> dict[str, pd.DataFrame]:
    """One DataFrame per table for a run; tick metrics are spread into `metric_*` columns."""
    run = store.get_run(run_id)
    rows = {
        "runs": [run.model_dump()],
        "ticks": [t.model_dump() for t in store.ticks(run_id)],
        "agent_steps": [s.model_dump() for s in store.steps(run_id)],
        "events": [e.model_dump() for e in store.events(run_id)],
        "llm_calls": [c.model_dump() for c in store.llm_calls(run_id)],
    }
    return {name: pd.DataFrame([_flat(r, ("metrics",)) for r in rs]) for name, rs in rows.items()}


def export_run(store: Store, run_id: str, out_dir: Path, fmt: str) -> list[Path]:
    """Write every table of the run into `out_dir` as `<table>.<fmt>`; returns the paths."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, frame in run_frames(store, run_id).items():
        path = out_dir / f"{name}.{fmt}"
        if fmt == "csv":
            frame.to_csv(path, index=False)
        else:
            frame.to_parquet(path, index=False)
        paths.append(path)
    return paths
