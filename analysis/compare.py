"""Comparing runs: metric means with confidence intervals across seeds, and survival curves.

Pure functions of the runs frame from `analysis.queries.list_runs` (one row per run, final
metrics in `m.NAME` columns): no database, no Streamlit.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

from sim.reward.intervals import is_rate, mean_interval

def mean_ci(values: Sequence[float], metric: str = "") -> dict[str, Any]:
    """Mean and 95% interval of the finite values (`sim.reward.intervals.mean_interval`: Wilson for a rate's 0/1
    values, else a percentile bootstrap, so never past the metric's bounds; one value: no interval)."""
    return mean_interval(values, rate=is_rate(metric))


def metric_columns(runs: pd.DataFrame) -> list[str]:
    """Final metric names present (with a number) in these runs."""
    cols = [c for c in runs.columns if c.startswith("m.") and pd.to_numeric(runs[c], errors="coerce").notna().any()]
    return [c[2:] for c in cols]


def varying_keys(runs: pd.DataFrame, ignore: Sequence[str] = ()) -> list[str]:
    """Config keys whose values differ between these runs (seeds are not config)."""
    configs = [dict(c or {}) for c in runs["config"]]
    keys = sorted({k for c in configs for k in c} - set(ignore))
    return [k for k in keys if len({json.dumps(c.get(k), sort_keys=True, default=str) for c in configs}) > 1]


def config_labels(runs: pd.DataFrame, ignore: Sequence[str] = (), keys: Sequence[str] | None = None) -> pd.Series:
    """A label per run naming its values of `keys` (default: every config key that differs), scenario first
    when several; runs with equal labels are pooled as seeds of one group."""
    configs = [dict(c or {}) for c in runs["config"]]
    varying = list(keys) if keys is not None else varying_keys(runs, ignore)
    scenarios = runs["scenario"].tolist()
    multi = len(set(scenarios)) > 1
    labels = []
    for scen, c in zip(scenarios, configs):
        parts = ([scen] if multi else []) + [f"{k}={json.dumps(c.get(k), default=str)}" for k in varying]
        labels.append(", ".join(parts) or "same config")
    return pd.Series(labels, index=runs.index)


def summarise(runs: pd.DataFrame, by: pd.Series, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per (group, metric): n runs, mean, 95% interval (`mean_ci`), sd, and the interval's method."""
    rows = []
    for group, idx in runs.groupby(by.values).groups.items():
        for m in metrics:
            col = f"m.{m}"
            values = pd.to_numeric(runs.loc[idx, col], errors="coerce").tolist() if col in runs else []
            rows.append({"group": group, "metric": m, **mean_ci(values, m)})
    return pd.DataFrame(rows, columns=["group", "metric", "n", "mean", "lo", "hi", "sd", "method"])


def kaplan_meier(times: Sequence[float], events: Sequence[bool]) -> pd.DataFrame:
    """Kaplan-Meier estimate S(t): share of runs surviving past t; `events` True = collapsed at its time
    (False = censored: still alive when the run ended). Starts at (0, 1.0)."""
    pairs = sorted((float(t), bool(e)) for t, e in zip(times, events))
    at_risk = len(pairs)
    surv = 1.0
    rows = [{"time": 0.0, "survival": 1.0, "at_risk": at_risk, "collapsed": 0}]
    i = 0
    while i < len(pairs):
        t = pairs[i][0]
        dead = sum(1 for tt, e in pairs if tt == t and e)
        total = sum(1 for tt, _ in pairs if tt == t)
        if dead:
            surv *= 1 - dead / at_risk
            rows.append({"time": t, "survival": surv, "at_risk": at_risk, "collapsed": dead})
        at_risk -= total
        i += total
    return pd.DataFrame(rows)


def survival(runs: pd.DataFrame, by: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per group: runs, share collapsed, mean survival time; and the Kaplan-Meier curve per group.

    Uses the final metrics `survival_time` and `collapsed` (else status == 'collapsed')."""
    summary, curves = [], []
    if "m.survival_time" not in runs:
        return pd.DataFrame(columns=["group", "runs", "share_collapsed", "mean_survival_time"]), pd.DataFrame()
    for group, idx in runs.groupby(by.values).groups.items():
        part = runs.loc[idx]
        times = pd.to_numeric(part["m.survival_time"], errors="coerce")
        ok = times.notna()
        if not ok.any():
            continue
        if "m.collapsed" in part:
            collapsed = pd.to_numeric(part["m.collapsed"], errors="coerce").fillna(0) > 0
        else:
            collapsed = part["status"] == "collapsed"
        times, collapsed = times[ok], collapsed[ok]
        summary.append({"group": group, "runs": int(ok.sum()), "share_collapsed": float(collapsed.mean()),
                        "mean_survival_time": float(times.mean())})
        curve = kaplan_meier(times.tolist(), collapsed.tolist())
        curve["group"] = group
        curves.append(curve)
    return (pd.DataFrame(summary, columns=["group", "runs", "share_collapsed", "mean_survival_time"]),
            pd.concat(curves, ignore_index=True) if curves else pd.DataFrame())
