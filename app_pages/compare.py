"""Compare: runs chosen by hand or by sweep; final metrics across seeds with 95% confidence
intervals; the reward-mode ablation side by side; survival (share collapsed, mean survival time,
a Kaplan-Meier curve); a parent run and its forks from the branch tick."""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

from analysis import compare as cmp
from app_pages import charts
from app_pages.common import page, q

MAX_DEFAULT = 30


def _pick(table: pd.DataFrame) -> pd.DataFrame:
    sweeps = sorted(table["sweep_id"].dropna().unique()) if "sweep_id" in table else []
    modes = ["by hand"] + (["a sweep"] if sweeps else [])
    mode = st.radio("Choose runs", modes, horizontal=True)
    if mode == "a sweep":
        sweep = st.selectbox("Sweep", sweeps)
        return table[table["sweep_id"] == sweep]
    scenarios = sorted(table["scenario"].unique())
    newest = table.iloc[0]["scenario"]
    scenario = st.selectbox("Scenario", scenarios, index=scenarios.index(newest))
    pool = table[(table["scenario"] == scenario) & (table["status"] != "running")]
    ids = st.multiselect("Runs", pool["run_id"].tolist(), default=pool["run_id"].tolist()[:MAX_DEFAULT],
                         format_func=lambda i: f"{i} · seed {pool.set_index('run_id').at[i, 'seed']}")
    return pool[pool["run_id"].isin(ids)]


def _values(chosen: pd.DataFrame, groups: pd.Series, metric: str) -> pd.DataFrame:
    return pd.DataFrame({"run_id": chosen["run_id"], "group": groups.values,
                         "value": pd.to_numeric(chosen[f"m.{metric}"], errors="coerce")}).dropna(subset=["value"])


def _forks(table: pd.DataFrame) -> None:
    if "parent_id" not in table or table["parent_id"].dropna().empty:
        st.caption("No forks stored (runs forked from a parent at a branch tick appear here).")
        return
    parents = sorted(table["parent_id"].dropna().unique())
    parent = st.selectbox("Parent run", parents)
    forks = table[table["parent_id"] == parent]
    prow = table[table["run_id"] == parent]
    if prow.empty:
        st.warning(f"Parent run {parent} is not in the store; showing its forks only.")
    branch = pd.to_numeric(forks["branch_tick"], errors="coerce").min() if "branch_tick" in forks else None
    lines = []
    for _, r in pd.concat([prow, forks]).iterrows():
        frame = q("tick_frame", r.to_dict(), r["run_id"])
        if not frame.empty:
            frame["run"] = ("parent " if r["run_id"] == parent else "fork ") + r["run_id"]
            lines.append(frame)
    if not lines:
        st.info("No ticks stored for these runs.")
        return
    frames = pd.concat(lines, ignore_index=True)
    metric_cols = [c for c in frames.columns
                   if c not in ("tick", "tick_seconds", "run") and pd.api.types.is_numeric_dtype(frames[c])]
    metric = st.selectbox("Metric over time", metric_cols)
    has_branch = branch is not None and not pd.isna(branch)
    if has_branch:
        st.caption(f"Forks branch at tick {int(branch)}.")
    st.altair_chart(charts.forks(frames, metric, branch if has_branch else None), width="stretch")


def render(table: pd.DataFrame) -> None:
    st.title("Compare runs")
    chosen = _pick(table)
    if chosen.empty:
        st.info("Choose some finished runs to compare.")
        return
    metrics = cmp.metric_columns(chosen)
    varying = cmp.varying_keys(chosen)
    keys = st.multiselect("Group by", varying, default=varying, help="runs equal in these config fields are pooled as seeds "
                          "of one group; leave out a field to pool over it") if varying else []
    groups = cmp.config_labels(chosen, keys=keys)
    st.caption(f"{len(chosen)} runs in {groups.nunique()} group(s) by what differs in their configs (seeds pooled).")
    tabs = st.tabs(list(TABS), key="compare_tab", on_change="rerun")
    for tab, show in zip(tabs, TABS.values()):
        if tab.open is not False:
            with tab:
                show(table, chosen, groups, metrics)


def _seeds(table: pd.DataFrame, chosen: pd.DataFrame, groups: pd.Series, metrics: list[str]) -> None:
    if not metrics:
        st.info("These runs have no final metrics yet.")
        return
    preferred = ("efficiency", "equality", "gain", "survival_time", "perolat_efficiency")
    default = [m for m in preferred if m in metrics][:3] or metrics[:3]
    picked = st.multiselect("Final metrics", metrics, default=default)
    summary = cmp.summarise(chosen, groups, picked)
    for m in picked:
        part = summary[summary["metric"] == m]
        st.altair_chart(charts.ci_points(part, _values(chosen, groups, m), title=f"{m}: runs, mean and 95% CI"), width="stretch")
    st.dataframe(summary, hide_index=True, width="stretch")


def _ablation(table: pd.DataFrame, chosen: pd.DataFrame, groups: pd.Series, metrics: list[str]) -> None:
    modes = chosen["reward_mode"].fillna("?")
    if modes.nunique() < 2:
        st.info("All chosen runs share one reward mode; choose runs with private, integrated and cooperative modes "
                "(e.g. `--set reward_mode=cooperative`) to see the ablation.")
        return
    others = cmp.config_labels(chosen, ignore=("reward_mode", "lam"))
    label = pd.Series((modes + np.where(others.nunique() > 1, " · " + others, "")).values, index=chosen.index)
    picked = st.multiselect("Metrics", metrics, default=metrics[:3], key="ablation_metrics")
    summary = cmp.summarise(chosen, label, picked)
    cols = st.columns(max(1, min(3, len(picked))))
    for i, m in enumerate(picked):
        part = summary[summary["metric"] == m]
        cols[i % len(cols)].altair_chart(charts.ci_points(part, _values(chosen, label, m), title=m), width="stretch")
    if picked:
        st.dataframe(summary.pivot_table(index="group", columns="metric", values="mean"), width="stretch")


def _survival(table: pd.DataFrame, chosen: pd.DataFrame, groups: pd.Series, metrics: list[str]) -> None:
    summary, curves = cmp.survival(chosen, groups)
    if summary.empty:
        st.info("These runs have no `survival_time` final metric (only scenarios that can end early report one).")
        return
    st.dataframe(summary, hide_index=True, width="stretch",
                 column_config={"share_collapsed": st.column_config.ProgressColumn("share collapsed", min_value=0, max_value=1)})
    st.altair_chart(charts.survival_curves(curves), width="stretch")


def _forks_tab(table: pd.DataFrame, chosen: pd.DataFrame, groups: pd.Series, metrics: list[str]) -> None:
    _forks(table)


TABS = {"Across seeds": _seeds, "Reward modes": _ablation, "Survival": _survival, "Forks": _forks_tab}


page(render)
