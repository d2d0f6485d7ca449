"""Stored runs as pandas DataFrames, and export to CSV or Parquet.

Columns come from the table definitions in a fixed order (plus `metric_*` columns, sorted,
for the ticks table), and JSON values are written with sorted keys, so two exports of the
same run are byte-identical; an empty table is still written with its header (CSV) or its
schema (Parquet), so pandas reads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Optional

import pandas as pd

from analysis.model_usage import Prices, model_usage
from sim.core.errors import UsageError
from sim.store.store import Store
from sim.store.tables import AgentStep, EventRow, LLMCall, Run, Tick

TABLES = ("runs", "ticks", "agent_steps", "events", "llm_calls")
MODELS = {"runs": Run, "ticks": Tick, "agent_steps": AgentStep, "events": EventRow, "llm_calls": LLMCall}


def _dtype(column: Any) -> str:
    """The pandas dtype of a table column (nullable kinds, so an empty frame keeps its schema).

    JSON and timestamps are written as text (sorted-key JSON, ISO 8601).
    """
    try:
        py = column.type.python_type
    except NotImplementedError:
        return "string"
    return {bool: "boolean", int: "Int64", float: "float64"}.get(py, "string")


def _cell(value: Any) -> Any:
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def table_frame(name: str, rows: list[Any], metric_keys: Optional[Sequence[str]] = None) -> pd.DataFrame:
    """Rows of one table as a frame with the table's columns, in the table's order and dtypes.

    The ticks table also gets one float `metric_<key>` column per key of `metric_keys` (default: the keys these
    rows have), so the chunks of one export all have the same columns.
    """
    columns = list(MODELS[name].__table__.columns)
    data = {c.name: [_cell(getattr(r, c.name)) for r in rows] for c in columns}
    frame = pd.DataFrame({c.name: pd.Series(data[c.name], dtype=_dtype(c)) for c in columns})
    if name == "ticks":
        keys = metric_keys if metric_keys is not None else sorted({k for r in rows for k in (r.metrics or {})})
        for k in keys:
            frame[f"metric_{k}"] = pd.Series([(r.metrics or {}).get(k) for r in rows], dtype="float64")
    return frame


def run_frames(store: Store, run_id: str) -> dict[str, pd.DataFrame]:
    """One DataFrame per table for a run (all in memory: for reading, not export); tick metrics are also spread
    into `metric_*` columns."""
    run = store.get_run(run_id)
    rows = {"runs": [run], "ticks": store.ticks(run_id), "agent_steps": store.steps(run_id),
            "events": store.events(run_id), "llm_calls": store.llm_calls(run_id)}
    return {name: table_frame(name, rs) for name, rs in rows.items()}


def _chunks(store: Store, run_id: str, name: str, chunk: int) -> Iterator[list[Any]]:
    """The table's rows for the run in chunks; at least one (maybe empty) chunk, so an empty table keeps its columns."""
    if name == "runs":
        yield [store.get_run(run_id)]
        return
    empty = True
    for rows in store.iter_rows(MODELS[name], run_id, chunk):
        empty = False
        yield rows
    if empty:
        yield []


def _write(path: Path, frames: Iterator[pd.DataFrame], fmt: str) -> None:
    """Write a table chunk by chunk: CSV with one header, Parquet as one row group per chunk."""
    if fmt == "csv":
        with open(path, "w", newline="", encoding="utf-8") as f:
            for i, frame in enumerate(frames):
                frame.to_csv(f, index=False, header=i == 0)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq
    writer = None
    try:
        for frame in frames:
            table = pa.Table.from_pandas(frame, preserve_index=False)
            writer = writer or pq.ParquetWriter(path, table.schema)
            writer.write_table(table)
    finally:
        if writer is not None:
            writer.close()


def export_run(store: Store, run_id: str, out_dir: Path, fmt: str, *, chunk: int = 20_000,
               prices: Optional[Prices] = None) -> list[Path]:
    """Write every table of the run into `out_dir` as `<table>.<fmt>`, and `llm_usage.<fmt>` (calls, tokens, latency,
    fallbacks and cost per group and model, analysis.model_usage, under `prices`); returns the paths.

    Rows are read and written `chunk` at a time, so memory does not grow with the run; the files are the same
    whatever the chunk size (tests compare them).
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"bad value for '--out': {str(out_dir)!r} is a file, not a folder")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"bad value for '--out': cannot create folder {str(out_dir)!r}: {exc.strerror}") from None
    store.get_run(run_id)
    metric_keys = sorted({k for rows in store.iter_rows(Tick, run_id, chunk) for r in rows for k in (r.metrics or {})})
    paths = []
    try:
        for name in TABLES:
            path = out_dir / f"{name}.{fmt}"
            _write(path, (table_frame(name, rows, metric_keys) for rows in _chunks(store, run_id, name, chunk)), fmt)
            paths.append(path)
        path = out_dir / f"llm_usage.{fmt}"
        _write(path, iter([usage_frame(model_usage(store, run_id, prices))]), fmt)
        paths.append(path)
    except OSError as exc:
        raise UsageError(f"bad value for '--out': cannot write into {str(out_dir)!r}: {exc.strerror}") from None
    return paths


USAGE_COLUMNS = {"backend": "string", "group": "string", "model": "string", "model_id": "string", "calls": "Int64",
                 "cache_hits": "Int64", "tokens_in": "Int64", "tokens_out": "Int64", "latency_s": "float64",
                 "latency_per_call_s": "float64", "fallbacks": "Int64", "cost": "float64"}


def usage_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """A run's LLM usage per group and model (`analysis.model_usage.model_usage`) as a frame of fixed columns."""
    return pd.DataFrame({c: pd.Series([r[c] for r in rows], dtype=t) for c, t in USAGE_COLUMNS.items()})
