"""Compare: runs chosen by hand (every finished run of a scenario by default) or by sweep; final metrics across
seeds with 95% intervals; the reward-mode ablation side by side; survival (share collapsed, mean survival time, a
Kaplan-Meier curve); metrics over time across runs; a parent run and its forks from the branch tick.

Runs are pooled as seeds of one group only when scenario, backend (policy, LLM provider and model), the group-by
config fields and lineage agree: a fork is never a seed of its parent's group; forks form their own groups,
labelled "fork of PARENT at tick N". Groups are G1, G2, ... in the charts, with a legend table of their full labels.
The chosen runs, the group-by fields and the open tab are in the URL, so a copied link opens the same comparison."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from analysis import compare as cmp
from app_pages import charts, export
from app_pages import compare_charts as cc
from app_pages.common import (db_url, engine as common_engine, init_state, page, q, scenario_class, set_url, url_list, url_tabs,
                              url_value)
from sim.store import queries

#: Over time reads one tick frame per run; past this many runs it reads the newest ones and says so
MAX_OVER_TIME = 400
PREFERRED = ("efficiency", "equality", "gain", "survival_time", "perolat_efficiency")
ABLATION_KEYS = ("reward_mode", "lam")


class View:
    """What every tab needs: the chosen runs, their groups (full labels), short names and the legend."""

    def __init__(self, table: pd.DataFrame, chosen: pd.DataFrame, keys: list[str]) -> None:
        self.table = table
        self.chosen = chosen
        self.keys = keys
        self.labels = cmp.group_labels(chosen, keys=keys)
        self.names = cmp.short_names(self.labels)
        self.legend = cmp.legend(chosen, self.labels, self.names)
        self.metrics = cmp.metric_columns(chosen)
        self.scenario = str(chosen["scenario"].iloc[0])

    def named(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` with the group's short name as its first column."""
        out = frame.copy()
        out.insert(0, "name", out["group"].map(self.names))
        return out


# ----- choosing runs ---------------------------------------------------------------------------------------------------
def _pick(table: pd.DataFrame) -> tuple[pd.DataFrame, int, str]:
    """The chosen runs, how many were offered, and where from; the choice is in the URL (?runs=, ?sweep=)."""
    ended = table[table["status"] != "running"]
    if ended.empty:
        return ended, 0, ""
    url_runs = [i for i in url_list("runs") if i in set(ended["run_id"])]
    sweeps = sorted(ended["sweep_id"].dropna().unique()) if "sweep_id" in ended else []
    modes = ["by hand"] + (["a sweep"] if sweeps else [])
    init_state("compare_mode", "a sweep" if url_value("sweep") in sweeps else "by hand")
    mode = st.radio("Choose runs", modes, horizontal=True, key="compare_mode")
    if mode == "a sweep":
        init_state("compare_sweep", url_value("sweep") if url_value("sweep") in sweeps else sweeps[0])
        sweep = st.selectbox("Sweep", sweeps, key="compare_sweep")
        set_url("sweep", sweep)
        pool, source = ended[ended["sweep_id"] == sweep], f"sweep {sweep}"
    else:
        set_url("sweep", None)
        scenarios = sorted(ended["scenario"].unique())
        from_url = ended.loc[ended["run_id"].isin(url_runs), "scenario"]
        init_state("compare_scenario", from_url.iloc[0] if len(from_url) else str(ended.iloc[0]["scenario"]))
        if st.session_state["compare_scenario"] not in scenarios:
            st.session_state["compare_scenario"] = scenarios[0]
        scenario = st.selectbox("Scenario", scenarios, key="compare_scenario")
        pool, source = ended[ended["scenario"] == scenario], f"scenario {scenario}"
    ids = pool["run_id"].tolist()
    default = pool.loc[pool["status"] != "failed", "run_id"].tolist() or ids
    if st.session_state.get("compare_pool") != source:  # first view, or another scenario / sweep: all its runs
        wanted = [i for i in url_runs if i in ids] if "compare_pool" not in st.session_state else []
        st.session_state["compare_runs"] = wanted or default
        st.session_state["compare_pool"] = source
    else:  # runs deleted meanwhile drop out
        st.session_state["compare_runs"] = [i for i in st.session_state.get("compare_runs", []) if i in ids]
    seeds = dict(zip(pool["run_id"], pool["seed"]))
    status = dict(zip(pool["run_id"], pool["status"]))
    chosen_ids = st.multiselect("Runs", ids, key="compare_runs",
                                format_func=lambda i: f"{i} · seed {seeds.get(i)} · {status.get(i)}")
    set_url("runs", None if sorted(chosen_ids) == sorted(default) else chosen_ids)  # (the default needs no list)
    return pool[pool["run_id"].isin(chosen_ids)], len(ids), source


def _group_keys(chosen: pd.DataFrame) -> list[str]:
    """The config fields that split groups (all that differ by default); in the URL as ?by= ('-': none)."""
    varying = cmp.varying_keys(chosen)
    if not varying:
        set_url("by", None)
        return []
    if st.session_state.get("compare_by_options") != varying:  # first view or other runs: from the URL, else all
        wanted = url_list("by") if "compare_by_options" not in st.session_state else []
        st.session_state["compare_by"] = ([k for k in wanted if k in varying] if wanted else list(varying))
        st.session_state["compare_by_options"] = varying
    keys = st.multiselect("Group by", varying, key="compare_by",
                          help="runs equal in these config fields (and in scenario, backend and lineage) are pooled "
                               "as seeds of one group; leave out a field to pool over it")
    set_url("by", keys if keys else ["-"])
    return list(keys)


# ----- the page ----------------------------------------------------------------------------------------------------------
def render(table: pd.DataFrame) -> None:
    st.title("Compare runs")
    chosen, offered, source = _pick(table)
    if chosen.empty:
        st.info("Choose some finished runs to compare.")
        return
    keys = _group_keys(chosen)
    view = View(table, chosen, keys)
    left_out = [k for k in cmp.varying_keys(chosen) if k not in keys]
    st.caption(f"{len(chosen)} of {offered} ended runs of {source} chosen (every ended run that did not fail by "
               f"default; no limit) in {len(view.names)} group(s). Runs are pooled as seeds only when scenario, "
               "backend (policy, LLM provider and model), the group-by fields and lineage agree: forks form their own "
               "groups ('fork of PARENT at tick N'), never seeds of their parent's group."
               + (f" Pooled over: {', '.join(left_out)}." if left_out else ""))
    with st.expander(f"Groups: {', '.join(view.legend['name'].head(12))}{' …' if len(view.legend) > 12 else ''}",
                     expanded=len(view.legend) > 1):
        st.table(cc.legend_table(view.legend).set_index("name"))
    _report_button(view)
    tabs = url_tabs(list(TABS), "compare_tab")
    for tab, show in zip(tabs, TABS.values()):
        if tab.open is not False:
            with tab:
                show(view)


def _default_metrics(metrics: list[str]) -> list[str]:
    return [m for m in PREFERRED if m in metrics][:3] or metrics[:3]


def _seeds_figures(view: View, picked: list[str]) -> tuple[pd.DataFrame, list[tuple[str, Any]]]:
    summary = cmp.summarise(view.chosen, view.labels, picked)
    figures = []
    for m in picked:
        part = summary[summary["metric"] == m]
        values = cmp.run_values(view.chosen, view.labels, m)
        figures.append((m, cc.ci_points(part, values, view.names, title=f"{m}: runs, mean and 95% interval",
                                        bounds=cmp.value_bounds(m, values["value"].tolist()))))
    return view.named(summary), figures


def _seeds(view: View) -> None:
    if not view.metrics:
        st.info("These runs have no final metrics yet.")
        return
    init_state("compare_metrics", [m for m in url_list("metrics") if m in view.metrics] or _default_metrics(view.metrics))
    st.session_state["compare_metrics"] = [m for m in st.session_state["compare_metrics"] if m in view.metrics]
    picked = st.multiselect("Final metrics", view.metrics, key="compare_metrics")
    set_url("metrics", picked)
    summary, figures = _seeds_figures(view, picked)
    for m, fig in figures:
        export.chart(fig, f"{m}-across-seeds", key=f"cmp-seeds-{m}")
    st.dataframe(summary, hide_index=True, width="stretch")
    st.caption("Intervals: Wilson for a rate's 0/1 values (all 3 of 3 runs collapsed: about [0.44, 1]), else a percentile "
               "bootstrap of the mean (within the runs' values); every interval is kept within the metric's bounds "
               "(shares in [0, 1]). Fewer than 10 runs: rough.")


def _ablation_labels(view: View) -> tuple[pd.Series, dict[str, str], pd.DataFrame]:
    """Reward mode · setting (S1, S2, ... when the runs differ in more than the reward mode); the settings' legend."""
    modes = view.chosen["reward_mode"].fillna("?").astype(str)
    rest = cmp.group_labels(view.chosen, keys=[k for k in view.keys if k not in ABLATION_KEYS])
    if rest.nunique() > 1:
        rest_names = cmp.short_names(rest, prefix="S")
        label = pd.Series([f"{m} · {rest_names[r]}" for m, r in zip(modes, rest)], index=view.chosen.index)
        legend = cmp.legend(view.chosen, rest, rest_names)
    else:
        label, legend = modes, pd.DataFrame()
    return label, {v: v for v in label}, legend


def _ablation_figures(view: View, picked: list[str]) -> tuple[pd.DataFrame, list[tuple[str, Any]], pd.DataFrame]:
    label, names, legend = _ablation_labels(view)
    summary = cmp.summarise(view.chosen, label, picked)
    figures = []
    for m in picked:
        values = cmp.run_values(view.chosen, label, m)
        figures.append((m, cc.ci_points(summary[summary["metric"] == m], values, names, title=m,
                                        bounds=cmp.value_bounds(m, values["value"].tolist()))))
    return summary, figures, legend


def _ablation(view: View) -> None:
    modes = view.chosen["reward_mode"].fillna("?")
    if modes.nunique() < 2:
        st.info("All chosen runs share one reward mode; choose runs with private, integrated and cooperative modes "
                "(e.g. `--set reward_mode=cooperative`) to see the ablation.")
        return
    init_state("ablation_metrics", _default_metrics(view.metrics))
    st.session_state["ablation_metrics"] = [m for m in st.session_state["ablation_metrics"] if m in view.metrics]
    picked = st.multiselect("Metrics", view.metrics, key="ablation_metrics")
    summary, figures, legend = _ablation_figures(view, picked)
    if not legend.empty:
        st.caption("The runs differ in more than their reward mode: S1, S2, ... name their other settings.")
        st.table(cc.legend_table(legend).set_index("name"))
    cols = st.columns(2) if len(figures) > 1 else [st.container()]
    for i, (m, fig) in enumerate(figures):
        with cols[i % len(cols)]:
            export.chart(fig, f"{m}-by-reward-mode", key=f"cmp-ablation-{m}")
    if picked:
        st.dataframe(summary.pivot_table(index="group", columns="metric", values="mean"), width="stretch")


def _survival_parts(view: View) -> tuple[pd.DataFrame, Any]:
    summary, curves = cmp.survival(view.chosen, view.labels)
    if summary.empty:
        return summary, None
    horizon = float(pd.to_numeric(summary["horizon"], errors="coerce").max())
    return view.named(summary), cc.survival_curves(curves, view.names, horizon=horizon)


def _survival(view: View) -> None:
    summary, figure = _survival_parts(view)
    if summary.empty:
        st.info("These runs have no `survival_time` final metric (only scenarios that can end early report one).")
        return
    st.dataframe(summary, hide_index=True, width="stretch",
                 column_config={"share_collapsed": st.column_config.ProgressColumn("share collapsed", min_value=0,
                                                                                     max_value=1)})
    export.chart(figure, "survival-kaplan-meier", key="cmp-survival")
    st.caption("Kaplan-Meier (lifelines): a run that did not collapse is censored at its last tick, so a group that "
               "never collapses is a flat line at 1.0 up to its horizon.")


def _tick_frames(view: View, loader: Any) -> dict[str, pd.DataFrame]:
    rows = view.chosen.head(MAX_OVER_TIME)
    return {r["run_id"]: loader(r) for _, r in rows.iterrows()}


def _over_time_parts(view: View, frames: dict[str, pd.DataFrame], metric: str) -> tuple[pd.DataFrame, Any]:
    data = cmp.over_time(frames, dict(zip(view.chosen["run_id"], view.labels)), metric)
    lines = cmp.reference_lines(view.chosen, view.labels, metric)
    unit = cmp.scenario_units(view.scenario).get(metric, "")
    noun = getattr(scenario_class(view.scenario), "tick_noun", None) or "tick"
    return data, cc.over_time(data, view.names, metric, unit=unit, lines=lines, noun=noun)


def _over_time_metrics(view: View, frames: dict[str, pd.DataFrame]) -> list[str]:
    return cmp.tick_metrics(frames.values(), skip=cmp.clock_metrics(view.scenario))


def _over_time_default(view: View, metrics: list[str]) -> str:
    with_lines = [m for m in metrics if not cmp.reference_lines(view.chosen.head(1), view.labels.head(1), m).empty]
    return (with_lines or metrics)[0]


def _over_time(view: View) -> None:
    frames = _tick_frames(view, lambda r: q("tick_frame", r.to_dict(), r["run_id"]))
    if len(view.chosen) > MAX_OVER_TIME:
        st.caption(f"Over time reads the first {MAX_OVER_TIME} of the {len(view.chosen)} chosen runs (newest first).")
    metrics = _over_time_metrics(view, frames)
    if not metrics:
        st.info("These runs have no per-tick metrics stored.")
        return
    wanted = url_value("metric")
    init_state("compare_over_metric", wanted if wanted in metrics else _over_time_default(view, metrics))
    if st.session_state["compare_over_metric"] not in metrics:
        st.session_state["compare_over_metric"] = metrics[0]
    metric = st.selectbox("Per-tick metric", metrics, key="compare_over_metric")
    set_url("metric", metric)
    data, figure = _over_time_parts(view, frames, metric)
    export.chart(figure, f"{metric}-over-time", key="cmp-over-time")
    st.caption("Line: the mean over a group's runs at each tick; band: their min-max. Runs that ended early (a "
               "collapse) leave the later ticks: `runs` in the tooltip says how many remain.")


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
    export.chart(charts.forks(frames, metric, branch if has_branch else None), f"{metric}-parent-and-forks",
                 key="cmp-forks")


def _forks_tab(view: View) -> None:
    _forks(view.table)


TABS = {"Across seeds": _seeds, "Reward modes": _ablation, "Survival": _survival, "Over time": _over_time,
        "Forks": _forks_tab}


# ----- the HTML report -----------------------------------------------------------------------------------------------
def _report_button(view: View) -> None:
    """One HTML page of the comparison: the groups, the across-seeds table and charts, the reward-mode ablation,
    survival, and the chosen metric over time. Built only when clicked, from what is chosen now."""
    url = db_url()
    seeds = list(st.session_state.get("compare_metrics") or _default_metrics(view.metrics))
    over = st.session_state.get("compare_over_metric")

    def build() -> list[export.Block]:
        engine = common_engine(url)
        load = (lambda r: queries.tick_frame(engine, r["run_id"])) if engine is not None else (lambda r: pd.DataFrame())
        return report_blocks(view, seeds, over, load)

    export.report_button(f"Compare: {view.scenario}", build, file_name=f"compare-{view.scenario}", key="cmp-report",
                         subtitle=f"{len(view.chosen)} runs in {len(view.names)} groups; store {url}")


def report_blocks(view: View, seeds: list[str], over: Any, load: Any) -> list[export.Block]:
    """The report's headings, tables and figures."""
    blocks: list[export.Block] = [
        ("text", "Runs pooled as seeds share scenario, backend, the group-by fields and lineage; forks are their own "
                 f"groups. Grouped by: {', '.join(view.keys) or 'nothing (one config)'}. Runs: "
                 f"{', '.join(view.chosen['run_id'])}."),
        "Groups", cc.legend_table(view.legend)]
    picked = [m for m in seeds if m in view.metrics]
    if picked:
        summary, figures = _seeds_figures(view, picked)
        blocks += ["Final metrics across seeds (mean and 95% interval)", summary, *[f for _, f in figures]]
    if view.chosen["reward_mode"].fillna("?").nunique() > 1 and picked:
        summary, figures, legend = _ablation_figures(view, picked)
        blocks += ["Reward modes", *([legend] if not legend.empty else []), summary, *[f for _, f in figures]]
    surv, figure = _survival_parts(view)
    if not surv.empty:
        blocks += ["Survival", surv, figure]
    frames = _tick_frames(view, load)
    metrics = _over_time_metrics(view, frames)
    if metrics:
        metric = over if over in metrics else _over_time_default(view, metrics)
        _, figure = _over_time_parts(view, frames, metric)
        blocks += [f"{metric} over time", figure]
    return blocks


page(render)
