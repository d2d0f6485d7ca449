"""Comparing runs: which runs pool as seeds of one group, metric means with intervals that respect the metric's
bounds, Kaplan-Meier survival curves with Greenwood bands and log-rank tests (lifelines), the share of runs
collapsed by each tick, and metrics over time across runs (a collapsed run counted as 0 after its collapse).

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
from sim.reward.intervals import finite, is_rate, mean_interval, wilson

#: columns of `summarise`, `survival`'s summary, `over_time` and `legend`
SUMMARY_COLUMNS = ["group", "metric", "n", "mean", "lo", "hi", "sd", "method"]
SURVIVAL_COLUMNS = ["group", "runs", "share_collapsed", "mean_survival_time", "horizon"]
CURVE_COLUMNS = ["group", "time", "survival", "lo", "hi", "at_risk", "collapsed", "censored"]
OVER_TIME_COLUMNS = ["group", "tick", "runs", "after_collapse", "mean", "lo", "hi"]
RUN_SERIES_COLUMNS = ["run_id", "group", "tick", "value", "after_collapse"]
COLLAPSED_BY_COLUMNS = ["group", "tick", "runs", "collapsed", "share", "lo", "hi"]
LOGRANK_COLUMNS = ["group_a", "group_b", "chi2", "p", "p_holm"]
#: what the Kaplan-Meier band is (lifelines' default interval)
KM_BAND = "95% pointwise band: Greenwood's variance on log(-log S(t)) (lifelines)"
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
    """Kaplan-Meier estimate S(t) (lifelines' KaplanMeierFitter): the share of runs not collapsed by t, with its 95%
    pointwise band (`lo`, `hi`: Greenwood's variance on the log(-log) scale, `KM_BAND`); `events` True = collapsed at
    its time, False = censored (alive when the run ended). One row per time from 0 to the last time (collapse or
    censoring), so runs that never collapse give a flat line at 1.0 up to their end."""
    from lifelines import KaplanMeierFitter

    cols = CURVE_COLUMNS[1:]
    pairs = [(float(t), bool(e)) for t, e in zip(times, events) if t is not None and math.isfinite(float(t))]
    if not pairs:
        return pd.DataFrame(columns=cols)
    fit = KaplanMeierFitter().fit([t for t, _ in pairs], event_observed=[e for _, e in pairs])
    band = fit.confidence_interval_
    table = fit.event_table.join(fit.survival_function_).join(band)
    out = pd.DataFrame({"time": table.index.astype(float), "survival": table[fit.survival_function_.columns[0]].astype(float).to_numpy(),
                        "lo": table[band.columns[0]].astype(float).to_numpy(),
                        "hi": table[band.columns[1]].astype(float).to_numpy(),
                        "at_risk": table["at_risk"].astype(int).to_numpy(),
                        "collapsed": table["observed"].astype(int).to_numpy(),
                        "censored": table["censored"].astype(int).to_numpy()})
    if out.empty or out["time"].iloc[0] > 0:
        out = pd.concat([pd.DataFrame([{"time": 0.0, "survival": 1.0, "lo": 1.0, "hi": 1.0, "at_risk": len(pairs),
                                        "collapsed": 0, "censored": 0}]), out], ignore_index=True)
    return out[cols].reset_index(drop=True)


def _collapse_times(runs: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """Each run's survival time (`m.survival_time`, NaN where absent) and whether it collapsed (`m.collapsed` > 0,
    else status == 'collapsed')."""
    times = pd.to_numeric(runs["m.survival_time"], errors="coerce") if "m.survival_time" in runs \
        else pd.Series(np.nan, index=runs.index)
    if "m.collapsed" in runs:
        collapsed = pd.to_numeric(runs["m.collapsed"], errors="coerce").fillna(0) > 0
    else:
        collapsed = runs["status"] == "collapsed"
    return times, collapsed


def survival(runs: pd.DataFrame, by: pd.Series) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per group: runs, share collapsed, mean survival time, the longest horizon; and its Kaplan-Meier curve with its
    Greenwood band.

    Uses the final metrics `survival_time` and `collapsed` (else status == 'collapsed')."""
    if "m.survival_time" not in runs:
        return pd.DataFrame(columns=SURVIVAL_COLUMNS), pd.DataFrame(columns=CURVE_COLUMNS)
    summary, curves = [], []
    reach = horizons(runs)
    all_times, all_collapsed = _collapse_times(runs)
    for group, idx in runs.groupby(by.values).groups.items():
        times, collapsed = all_times.loc[idx], all_collapsed.loc[idx]
        ok = times.notna()
        if not ok.any():
            continue
        times, collapsed = times[ok], collapsed[ok]
        horizon = float(np.nanmax([reach.loc[idx][ok].max(), times.max()]))
        summary.append({"group": group, "runs": int(ok.sum()), "share_collapsed": float(collapsed.mean()),
                        "mean_survival_time": float(times.mean()), "horizon": horizon})
        curve = kaplan_meier(times.tolist(), collapsed.tolist())
        curve.insert(0, "group", group)
        curves.append(curve)
    return (pd.DataFrame(summary, columns=SURVIVAL_COLUMNS),
            pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(columns=CURVE_COLUMNS))


def logrank(runs: pd.DataFrame, by: pd.Series) -> tuple[dict[str, Any], pd.DataFrame]:
    """The log-rank test between the groups' survival (lifelines): over all groups at once (`chi2`, `df`, `p`;
    None where fewer than two groups have runs), and between each pair (chi2, p, and p adjusted for the pairs by
    Holm's method). A test with no collapse in any group has nothing to compare: chi2 0, p 1."""
    from lifelines.statistics import multivariate_logrank_test, pairwise_logrank_test

    times, collapsed = _collapse_times(runs)
    ok = times.notna().to_numpy()
    groups = pd.Series(by.to_numpy()[ok])
    t, e = times.to_numpy()[ok], collapsed.to_numpy()[ok]
    if groups.nunique() < 2:
        return {"chi2": None, "df": None, "p": None, "groups": int(groups.nunique()), "runs": int(ok.sum())}, \
            pd.DataFrame(columns=LOGRANK_COLUMNS)
    overall = multivariate_logrank_test(t, groups, e)
    result = {"chi2": float(overall.test_statistic), "df": int(overall.degrees_of_freedom), "p": float(overall.p_value),
              "groups": int(groups.nunique()), "runs": int(ok.sum())}
    pairs = pairwise_logrank_test(t, groups, e).summary.reset_index()
    frame = pd.DataFrame({"group_a": pairs.iloc[:, 0].astype(str), "group_b": pairs.iloc[:, 1].astype(str),
                          "chi2": pairs["test_statistic"].astype(float), "p": pairs["p"].astype(float)})
    frame["p_holm"] = holm(frame["p"].tolist())
    return result, frame[LOGRANK_COLUMNS]


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of p-values for the number of tests (each at most 1, order kept)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    out = [0.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * float(pvalues[i])))
        out[i] = running
    return out


def collapsed_by_tick(runs: pd.DataFrame, by: pd.Series) -> pd.DataFrame:
    """Per group and tick t (1 to its longest horizon): the runs observed at t (collapsed by t, or still running at t),
    how many had collapsed by t, their share and its 95% Wilson interval (GovSim's share collapsed by month)."""
    times, collapsed = _collapse_times(runs)
    reach = horizons(runs)
    rows = []
    for group, idx in runs.groupby(by.values).groups.items():
        t, c, h = times.loc[idx], collapsed.loc[idx], reach.loc[idx]
        ok = t.notna()
        if not ok.any():
            continue
        t, c, h = t[ok], c[ok], h[ok].fillna(t[ok])
        last = int(np.nanmax([h.max(), t.max()]))
        for tick in range(1, last + 1):
            down = c & (t <= tick)
            seen = down | (t >= tick)  # (a run that ended before t without collapsing is no longer observed)
            n, k = int(seen.sum()), int(down.sum())
            if n == 0:
                continue
            lo, hi = wilson(k, n)
            rows.append({"group": group, "tick": tick, "runs": n, "collapsed": k, "share": k / n, "lo": lo, "hi": hi})
    return pd.DataFrame(rows, columns=COLLAPSED_BY_COLUMNS)


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


def collapse_ticks(runs: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """run_id -> (the tick it collapsed at, its horizon) for each run that collapsed (`m.collapsed`, else its status)."""
    times, collapsed = _collapse_times(runs)
    reach = horizons(runs)
    out = {}
    for i in runs.index[collapsed.to_numpy()]:
        ticks = pd.to_numeric(runs.at[i, "ticks"], errors="coerce") if "ticks" in runs else np.nan
        at = times.at[i] if pd.notna(times.at[i]) else ticks
        if pd.notna(at):
            out[str(runs.at[i, "run_id"])] = (float(at), float(reach.at[i]) if pd.notna(reach.at[i]) else float(at))
    return out


def run_series(frames: Mapping[str, pd.DataFrame], groups: Mapping[str, str], metric: str,
               collapsed: Optional[Mapping[str, tuple[float, float]]] = None) -> pd.DataFrame:
    """Every run's `metric` per tick (run_id, group, tick, value, after_collapse). A run in `collapsed` (run_id ->
    (collapse tick, horizon): `collapse_ticks`) counts as 0 at every tick after its collapse up to its horizon
    (GovSim's convention: a collapsed fishery catches nothing and holds no fish), those rows marked `after_collapse`."""
    parts = []
    for run_id, frame in frames.items():
        if run_id not in groups or metric not in frame or "tick" not in frame:
            continue
        values = pd.to_numeric(frame[metric], errors="coerce")
        part = pd.DataFrame({"run_id": run_id, "group": groups[run_id], "tick": frame["tick"].to_numpy(),
                             "value": values.to_numpy(), "after_collapse": False}).dropna(subset=["value"])
        if collapsed and run_id in collapsed:
            at, horizon = collapsed[run_id]
            last = int(max(at, part["tick"].max() if len(part) else at))
            later = range(last + 1, int(horizon) + 1)
            if len(later):
                part = pd.concat([part, pd.DataFrame({"run_id": run_id, "group": groups[run_id], "tick": list(later),
                                                      "value": 0.0, "after_collapse": True})], ignore_index=True)
        parts.append(part)
    if not parts:
        return pd.DataFrame(columns=RUN_SERIES_COLUMNS)
    return pd.concat(parts, ignore_index=True)[RUN_SERIES_COLUMNS]


def over_time(frames: Mapping[str, pd.DataFrame], groups: Mapping[str, str], metric: str,
              collapsed: Optional[Mapping[str, tuple[float, float]]] = None) -> pd.DataFrame:
    """Per group and tick, over its runs: how many runs count at the tick (and how many of them only as a collapsed
    run's 0: `after_collapse`), the mean, and the min-max band (lo, hi) of `metric`. `frames`: run_id -> tick frame;
    `groups`: run_id -> group; `collapsed`: as in `run_series` (None: a run that ended early leaves the later ticks)."""
    long = run_series(frames, groups, metric, collapsed)
    if long.empty:
        return pd.DataFrame(columns=OVER_TIME_COLUMNS)
    long["after_collapse"] = long["after_collapse"].astype(int)
    out = long.groupby(["group", "tick"]).agg(runs=("value", "count"), after_collapse=("after_collapse", "sum"),
                                              mean=("value", "mean"), lo=("value", "min"), hi=("value", "max"))
    return out.reset_index()[OVER_TIME_COLUMNS]


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
