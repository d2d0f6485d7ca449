"""Comparing runs: which runs pool as seeds of one group, metric means with intervals that respect the metric's
bounds, Kaplan-Meier survival curves (lifelines), and metrics over time across runs.

Pure functions of the runs frame from `sim.store.queries.list_runs` (one row per run, final metrics in `m.NAME`
columns) and of per-run tick frames (`sim.store.queries.tick_frame`): no database, no Streamlit.

Pooling rule: runs are seeds of one group only when their scenario, backend (the policy, and for an LLM run its
provider and model), their config (the fields grouped by) and their lineage agree. A fork or replay (`parent_id`
set) is never a seed of its parent's group: forks form their own group, labelled "fork of PARENT at tick N".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Optional

import numpy as np
import pandas as pd

from scenarios.registry import REGISTRY
from sim.reward.intervals import finite, is_rate, mean_interval

#: columns of `summarise`, `survival`'s summary, `over_time` and `legend`
SUMMARY_COLUMNS = ["group", "metric", "n", "mean", "lo", "hi", "sd", "method"]
SURVIVAL_COLUMNS = ["group", "runs", "share_collapsed", "mean_survival_time", "horizon"]
CURVE_COLUMNS = ["group", "time", "survival", "at_risk", "collapsed", "censored"]
OVER_TIME_COLUMNS = ["group", "tick", "runs", "mean", "lo", "hi"]
#: metric names (last dotted part) that are shares in [0, 1] whatever their values
UNIT_NAMES = frozenset({"equality", "efficiency", "over_usage", "collapsed", "survived", "gini", "share_collapsed",
                        "survival"})


# ----- groups -------------------------------------------------------------------------------------------------------
def metric_columns(runs: pd.DataFrame) -> list[str]:
    """Final metric names present (with a number) in these runs."""
    cols = [c for c in runs.columns if c.startswith("m.") and pd.to_numeric(runs[c], errors="coerce").notna().any()]
    return [c[2:] for c in cols]


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def varying_keys(runs: pd.DataFrame, ignore: Sequence[str] = ()) -> list[str]:
    """Config keys whose values differ between these runs (seeds are not config)."""
    configs = [dict(c or {}) for c in runs["config"]]
    keys = sorted({k for c in configs for k in c} - set(ignore))
    return [k for k in keys if len({_dump(c.get(k)) for c in configs}) > 1]


def backend_of(runs: pd.DataFrame) -> pd.Series:
    """Who decided in each run: the `backend` column (policy; LLM provider and model), else the policy."""
    if "backend" in runs:
        return runs["backend"].fillna(runs.get("policy", pd.Series("?", index=runs.index))).astype(str)
    return runs.get("policy", pd.Series("?", index=runs.index)).fillna("?").astype(str)


def lineage(runs: pd.DataFrame) -> pd.Series:
    """'' for a run of its own; 'fork of PARENT at tick N' (or 'from run PARENT' without a branch tick) for a fork."""
    parents = runs["parent_id"] if "parent_id" in runs else pd.Series(None, index=runs.index, dtype=object)
    branches = runs["branch_tick"] if "branch_tick" in runs else pd.Series(None, index=runs.index, dtype=object)
    out = []
    for parent, branch in zip(parents, branches):
        if parent is None or (isinstance(parent, float) and math.isnan(parent)) or parent == "":
            out.append("")
        elif branch is None or pd.isna(branch):
            out.append(f"from run {parent}")
        else:
            out.append(f"fork of {parent} at tick {int(branch)}")
    return pd.Series(out, index=runs.index, dtype=object)


def group_labels(runs: pd.DataFrame, keys: Optional[Sequence[str]] = None, ignore: Sequence[str] = ()) -> pd.Series:
    """The group of each run, as a full label; runs with equal labels are pooled as seeds.

    The label names the scenario and the backend where the runs differ in them, the values of `keys` (default:
    every config key that differs, less `ignore`) and the lineage of forks, so runs of different scenarios,
    backends or lineages never share a group whatever `keys` leaves out."""
    configs = [dict(c or {}) for c in runs["config"]]
    chosen = list(keys) if keys is not None else varying_keys(runs, ignore)
    scenarios = runs["scenario"].astype(str).tolist()
    backends = backend_of(runs).tolist()
    lines = lineage(runs).tolist()
    multi_scenario, multi_backend = len(set(scenarios)) > 1, len(set(backends)) > 1
    labels = []
    for scen, backend, line, c in zip(scenarios, backends, lines, configs):
        parts = (([scen] if multi_scenario else []) + ([backend] if multi_backend else [])
                 + [f"{k}={json.dumps(c.get(k), default=str)}" for k in chosen] + ([line] if line else []))
        labels.append(", ".join(parts) or "same config")
    return pd.Series(labels, index=runs.index, dtype=object)


def config_labels(runs: pd.DataFrame, ignore: Sequence[str] = (), keys: Sequence[str] | None = None) -> pd.Series:
    """Alias of `group_labels` (kept for callers of the first version)."""
    return group_labels(runs, keys=keys, ignore=ignore)


def short_names(labels: Iterable[str], prefix: str = "G") -> dict[str, str]:
    """A short unique name per distinct label (G1, G2, ... in the labels' sorted order), for chart axes and legends."""
    return {label: f"{prefix}{i}" for i, label in enumerate(sorted(set(labels)), start=1)}


def legend(runs: pd.DataFrame, labels: pd.Series, names: Mapping[str, str]) -> pd.DataFrame:
    """One row per group: its short name, how many runs, their backend, and the full label."""
    rows = []
    backends = backend_of(runs)
    for label, idx in runs.groupby(labels.values).groups.items():
        rows.append({"name": names[label], "runs": len(idx), "backend": ", ".join(sorted(set(backends.loc[idx]))),
                     "group": label})
    frame = pd.DataFrame(rows, columns=["name", "runs", "backend", "group"])
    number = pd.to_numeric(frame["name"].str.extract(r"(\d+)$")[0], errors="coerce").fillna(0)
    return frame.iloc[np.argsort(number.to_numpy(), kind="stable")].reset_index(drop=True)


# ----- intervals ------------------------------------------------------------------------------------------------------
def metric_bounds(metric: str) -> tuple[float, float]:
    """The natural range of a metric, from its name: rates, shares and equality lie in [0, 1]; else unbounded."""
    name = metric.rsplit(".", 1)[-1]
    if (is_rate(metric) or name in UNIT_NAMES or name.endswith(("_share", "_fraction", "_rate"))
            or name.startswith(("share_", "fraction_"))):
        return 0.0, 1.0
    return -math.inf, math.inf


def mean_ci(values: Sequence[float], metric: str = "") -> dict[str, Any]:
    """Mean and 95% interval of the finite values (`sim.reward.intervals.mean_interval`: Wilson for a rate's 0/1
    values, else a percentile bootstrap), kept inside the metric's bounds (`metric_bounds`); one value: no interval."""
    stats = mean_interval(values, rate=is_rate(metric))
    return bounded(stats, values, metric)


def value_bounds(metric: str, values: Sequence[float]) -> tuple[float, float]:
    """`metric_bounds(metric)` when every finite value lies inside them, else unbounded (a name is only a hint)."""
    low, high = metric_bounds(metric)
    xs = finite(values)
    return (low, high) if xs.size == 0 or (xs.min() >= low and xs.max() <= high) else (-math.inf, math.inf)


def bounded(stats: dict[str, Any], values: Sequence[float], metric: str = "") -> dict[str, Any]:
    """`stats` with lo/hi clipped to the metric's natural bounds (`metric_bounds`, trusted only while every value lies
    inside them: the grid games' `efficiency` is apples per step, not a share), and a bootstrap interval also to the
    values' range (where a resampled mean always lies). The mean is never moved. A Wilson interval is a statement about
    the rate, not the sample: 3 runs out of 3 collapsed gives [0.44, 1], which stays as it is."""
    xs = finite(values)
    if stats.get("lo") is None or xs.size == 0:
        return stats
    low, high = value_bounds(metric, xs)
    if stats.get("method") != "wilson":
        low, high = max(low, float(xs.min())), min(high, float(xs.max()))
    out = dict(stats)
    out["lo"] = float(min(max(stats["lo"], low), high))
    out["hi"] = float(max(min(stats["hi"], high), low))
    return out


def summarise(runs: pd.DataFrame, by: pd.Series, metrics: Sequence[str]) -> pd.DataFrame:
    """One row per (group, metric): n runs, mean, 95% interval (`mean_ci`, within bounds), sd, the interval's method."""
    rows = []
    for group, idx in runs.groupby(by.values).groups.items():
        for m in metrics:
            col = f"m.{m}"
            values = pd.to_numeric(runs.loc[idx, col], errors="coerce").tolist() if col in runs else []
            rows.append({"group": group, "metric": m, **mean_ci(values, m)})
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)


def run_values(runs: pd.DataFrame, by: pd.Series, metric: str) -> pd.DataFrame:
    """One row per run with a value of `metric`: run_id, group, value (the dots of a chart)."""
    col = f"m.{metric}"
    values = pd.to_numeric(runs[col], errors="coerce") if col in runs else pd.Series(np.nan, index=runs.index)
    out = pd.DataFrame({"run_id": runs["run_id"].to_numpy(), "group": by.to_numpy(), "value": values.to_numpy()})
    return out.dropna(subset=["value"]).reset_index(drop=True)


# ----- survival -------------------------------------------------------------------------------------------------------
def horizons(runs: pd.DataFrame) -> pd.Series:
    """Each run's horizon in ticks: its config's horizon field (`months`, ...) for a registered scenario, else its
    committed ticks."""
    out = []
    for _, r in runs.iterrows():
        field = getattr(REGISTRY.get(r["scenario"]), "horizon_field", "") or ""
        value = dict(r.get("config") or {}).get(field) if field else None
        try:
            out.append(float(value))
        except (TypeError, ValueError):
            ticks = pd.to_numeric(r.get("ticks"), errors="coerce")
            out.append(float(ticks) if pd.notna(ticks) else np.nan)
    return pd.Series(out, index=runs.index, dtype=float)


def kaplan_meier(times: Sequence[float], events: Sequence[bool]) -> pd.DataFrame:
    """Kaplan-Meier estimate S(t) (lifelines' KaplanMeierFitter): the share of runs not collapsed by t; `events`
    True = collapsed at its time, False = censored (alive when the run ended). One row per time from 0 to the last
    time (collapse or censoring), so runs that never collapse give a flat line at 1.0 up to their end."""
    from lifelines import KaplanMeierFitter

    cols = ["time", "survival", "at_risk", "collapsed", "censored"]
    pairs = [(float(t), bool(e)) for t, e in zip(times, events) if t is not None and math.isfinite(float(t))]
    if not pairs:
        return pd.DataFrame(columns=cols)
    fit = KaplanMeierFitter().fit([t for t, _ in pairs], event_observed=[e for _, e in pairs])
    table = fit.event_table.join(fit.survival_function_)
    out = pd.DataFrame({"time": table.index.astype(float), "survival": table.iloc[:, -1].astype(float).to_numpy(),
                        "at_risk": table["at_risk"].astype(int).to_numpy(),
                        "collapsed": table["observed"].astype(int).to_numpy(),
                        "censored": table["censored"].astype(int).to_numpy()})
    if out.empty or out["time"].iloc[0] > 0:
        out = pd.concat([pd.DataFrame([{"time": 0.0, "survival": 1.0, "at_risk": len(pairs), "collapsed": 0,
                                        "censored": 0}]), out], ignore_index=True)
    return out[cols].reset_index(drop=True)


def survival(runs: pd.DataFrame, by: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per group: runs, share collapsed, mean survival time, the longest horizon; and its Kaplan-Meier curve.

    Uses the final metrics `survival_time` and `collapsed` (else status == 'collapsed')."""
    if "m.survival_time" not in runs:
        return pd.DataFrame(columns=SURVIVAL_COLUMNS), pd.DataFrame(columns=CURVE_COLUMNS)
    summary, curves = [], []
    reach = horizons(runs)
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
        horizon = float(np.nanmax([reach.loc[idx][ok].max(), times.max()]))
        summary.append({"group": group, "runs": int(ok.sum()), "share_collapsed": float(collapsed.mean()),
                        "mean_survival_time": float(times.mean()), "horizon": horizon})
        curve = kaplan_meier(times.tolist(), collapsed.tolist())
        curve.insert(0, "group", group)
        curves.append(curve)
    return (pd.DataFrame(summary, columns=SURVIVAL_COLUMNS),
            pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(columns=CURVE_COLUMNS))


# ----- over time ------------------------------------------------------------------------------------------------------
def tick_metrics(frames: Iterable[pd.DataFrame], skip: Iterable[str] = ()) -> list[str]:
    """Numeric per-tick columns of these tick frames (metrics, then `state.*`), less the tick, its timing and `skip`
    (the scenario's clock metrics)."""
    drop = {"tick", "tick_seconds", *skip}
    seen: dict[str, None] = {}
    for frame in frames:
        for col in frame.columns:
            if col not in drop and pd.api.types.is_numeric_dtype(frame[col]) and frame[col].notna().any():
                seen.setdefault(col, None)
    return sorted(seen, key=lambda c: (c.startswith("state."), c))


def over_time(frames: Mapping[str, pd.DataFrame], groups: Mapping[str, str], metric: str) -> pd.DataFrame:
    """Per group and tick, over its runs: how many runs have the tick, the mean, and the min-max band (lo, hi) of
    `metric`. `frames`: run_id -> tick frame; `groups`: run_id -> group."""
    parts = []
    for run_id, frame in frames.items():
        if run_id in groups and metric in frame and "tick" in frame:
            values = pd.to_numeric(frame[metric], errors="coerce")
            parts.append(pd.DataFrame({"group": groups[run_id], "tick": frame["tick"].to_numpy(),
                                       "value": values.to_numpy()}).dropna(subset=["value"]))
    if not parts:
        return pd.DataFrame(columns=OVER_TIME_COLUMNS)
    long = pd.concat(parts, ignore_index=True)
    out = long.groupby(["group", "tick"])["value"].agg(runs="count", mean="mean", lo="min", hi="max").reset_index()
    return out[OVER_TIME_COLUMNS]


def scenario_units(scenario: str) -> dict[str, str]:
    """The scenario's units of its per-tick metrics (`metric_units`), {} when it declares none or is unknown."""
    return dict(getattr(REGISTRY.get(scenario), "metric_units", None) or {})


def clock_metrics(scenario: str) -> frozenset[str]:
    """Per-tick metrics that are the scenario's clock (never plotted)."""
    return frozenset(getattr(REGISTRY.get(scenario), "clock_metrics", None) or ())


def reference_lines(runs: pd.DataFrame, by: pd.Series, metric: str) -> pd.DataFrame:
    """The scenario's reference lines for `metric` (`reference_lines(config)` of its class): value, label, group.
    A line every group shares has group '' (drawn once); one that differs between groups names its group."""
    rows = []
    for group, idx in runs.groupby(by.values).groups.items():
        first = runs.loc[idx[0]]
        make = getattr(REGISTRY.get(first["scenario"]), "reference_lines", None)
        if make is None:
            continue
        try:
            lines = (make(dict(first.get("config") or {})) or {}).get(metric, [])
        except Exception:  # noqa: BLE001 - a scenario's helper must not break the page
            lines = []
        for value, label in lines:
            rows.append({"group": group, "value": float(value), "label": str(label)})
    frame = pd.DataFrame(rows, columns=["group", "value", "label"])
    if frame.empty:
        return frame
    ngroups = len(set(by))
    shared = frame.groupby(["value", "label"])["group"].transform("nunique") == ngroups
    frame.loc[shared, "group"] = ""
    return frame.drop_duplicates().reset_index(drop=True)
