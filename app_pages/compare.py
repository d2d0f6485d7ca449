"""Compare: runs chosen by hand (every finished run of a scenario by default) or by sweep; final metrics across
seeds with 95% intervals; the reward-mode ablation side by side; survival (share collapsed, mean survival time,
Kaplan-Meier curves with their Greenwood bands, the log-rank test between groups, the share collapsed by each tick);
metrics over time across runs (each run's line beside its group's mean; a collapsed run counts as 0 after its
collapse, GovSim's convention; a click on a run's point opens that tick); a parent run and its forks from the branch
tick, their transcripts side by side.

Runs are pooled as seeds of one group only when scenario, backend (policy, LLM provider and model), the group-by
config fields and lineage agree: a fork is never a seed of its parent's group; forks form their own groups,
labelled "fork of PARENT at tick N". Groups are G1, G2, ... in the charts, with a legend table of their full labels.
The chosen runs, the group-by fields and the open tab are in the URL, so a copied link opens the same comparison."""

from __future__ import annotations

from typing import Any, Optional

import pandas as pd
import streamlit as st

from analysis import compare as cmp
from app_pages import charts, export, tick_view
from app_pages import compare_charts as cc
from app_pages.common import (as_int, counted, db_url, engine as common_engine, eq, init_state, noun, one_of, page, q,
                              set_url, unit_of, url_list, url_tabs, url_value)
from app_pages.said import action_words
from sim.store import queries

#: Over time reads one tick frame per run; past this many runs it reads the newest ones and says so
MAX_OVER_TIME = 400
PREFERRED = ("efficiency", "equality", "gain", "survival_time", "perolat_efficiency")
ABLATION_KEYS = ("reward_mode", "lam")
#: the runs this page last wrote to the URL: a URL naming other runs was followed from a link
WRITTEN = "compare_url_runs"


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
        self.noun = noun(self.scenario)
        self.units = cmp.scenario_units(self.scenario)

    def named(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` with the group's short name as its first column."""
        out = frame.copy()
        out.insert(0, "name", out["group"].map(self.names))
        return out


# ----- choosing runs ---------------------------------------------------------------------------------------------------
def _pick(table: pd.DataFrame) -> tuple[pd.DataFrame, int, str]:
    """The chosen runs, how many were offered, and where from; the choice is in the URL (?runs=, ?sweep=). A URL whose
    runs this page did not write (a link followed, on the first view or later in the session: the Run page's "Compare
    with its parent") chooses those runs, their scenario or sweep with them."""
    ended = table[table["status"] != "running"]
    if ended.empty:
        return ended, 0, ""
    linked = bool(url_list("runs")) and url_list("runs") != st.session_state.get(WRITTEN)
    url_runs = [i for i in url_list("runs") if i in set(ended["run_id"])] if linked else []
    unknown = [i for i in url_list("runs") if i not in set(ended["run_id"])] if linked else []
    if unknown:
        st.warning(f"Not among this store's ended runs, left out: {', '.join(unknown)}.")
    sweeps = sorted(ended["sweep_id"].dropna().unique()) if "sweep_id" in ended else []
    modes = ["by hand"] + (["a sweep"] if sweeps else [])
    url_mode = "a sweep" if url_value("sweep") in sweeps else "by hand"
    if url_runs:
        st.session_state["compare_mode"] = url_mode
    init_state("compare_mode", url_mode)
    mode = st.radio("Choose runs", modes, horizontal=True, key="compare_mode")
    if mode == "a sweep":
        if url_runs:
            st.session_state["compare_sweep"] = url_value("sweep")
        init_state("compare_sweep", url_value("sweep") if url_value("sweep") in sweeps else sweeps[0])
        sweep = st.selectbox("Sweep", sweeps, key="compare_sweep")
        set_url("sweep", sweep)
        pool, source = ended[ended["sweep_id"] == sweep], f"sweep {sweep}"
    else:
        set_url("sweep", None)
        scenarios = sorted(ended["scenario"].unique())
        from_url = ended.loc[ended["run_id"].isin(url_runs), "scenario"]
        if len(from_url):
            st.session_state["compare_scenario"] = str(from_url.iloc[0])
        init_state("compare_scenario", str(ended.iloc[0]["scenario"]))
        if st.session_state["compare_scenario"] not in scenarios:
            st.session_state["compare_scenario"] = scenarios[0]
        scenario = st.selectbox("Scenario", scenarios, key="compare_scenario")
        pool, source = ended[ended["scenario"] == scenario], f"scenario {scenario}"
    ids = pool["run_id"].tolist()
    default = pool.loc[pool["status"] != "failed", "run_id"].tolist() or ids
    wanted = [i for i in url_runs if i in ids]
    if wanted or st.session_state.get("compare_pool") != source:  # a link, first view, another scenario / sweep
        st.session_state["compare_runs"] = wanted or default
        st.session_state["compare_pool"] = source
    else:  # runs deleted meanwhile drop out
        st.session_state["compare_runs"] = [i for i in st.session_state.get("compare_runs", []) if i in ids]
    seeds = dict(zip(pool["run_id"], pool["seed"]))
    status = dict(zip(pool["run_id"], pool["status"]))
    # many runs: their chips under a click (43 chips filled the first screen; the caption under says how many are
    # chosen). The label stays put while runs are picked: a new label would be a new, closed expander.
    with st.expander(f"Runs ({len(ids)} of {source})", expanded=len(ids) <= RUNS_OPEN):
        chosen_ids = st.multiselect("Runs", ids, key="compare_runs",
                                    format_func=lambda i: f"{i} · seed {seeds.get(i)} · {status.get(i)}")
    written = [] if sorted(chosen_ids) == sorted(default) else list(chosen_ids)  # (the default needs no list)
    set_url("runs", written)
    st.session_state[WRITTEN] = written
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


#: runs whose chips show open on a first view (more: under the "Runs: k of n chosen" expander)
RUNS_OPEN = 12
#: groups whose legend shows open on a first view (more: the expander's title names the first 12, the table opens on a
#: click; 15 groups of long labels filled the first screen and cost the browser ~0.3 s to lay out)
LEGEND_OPEN = 6


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
                     expanded=1 < len(view.legend) <= LEGEND_OPEN):
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
        figures.append((m, cc.ci_points(part, values, view.names, title=f"{m}: each run, the mean and its 95% interval",
                                        bounds=cmp.value_bounds(m, values["value"].tolist()), unit=unit_of(view.units, m),
                                        metric=m)))
    return view.named(summary), figures


#: the final metric Across seeds draws (one of those chosen)
DRAWN = "compare_drawn_metric"


def _seeds(view: View) -> None:
    if not view.metrics:
        st.info("These runs have no final metrics yet.")
        return
    init_state("compare_metrics", [m for m in url_list("metrics") if m in view.metrics] or _default_metrics(view.metrics))
    st.session_state["compare_metrics"] = [m for m in st.session_state["compare_metrics"] if m in view.metrics]
    picked = st.multiselect("Final metrics", view.metrics, key="compare_metrics")
    set_url("metrics", picked)
    summary, figures = _seeds_figures(view, picked)
    # one chart at a time (the browser draws each chart of a first view), the table has them all
    drawn = one_of("Chart", picked, DRAWN, url="chart", help="the metric drawn; the table under it has every one")
    for m, fig in figures:
        if m == drawn:
            export.chart(fig, f"{m}-across-seeds", key=f"cmp-seeds-{m}")
    st.dataframe(summary, hide_index=True, width="stretch")
    st.caption("Intervals: Wilson for a rate's 0/1 values (e.g. 3 runs of 3 collapsed: [0.44, 1]), else a percentile "
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
        figures.append((m, cc.ci_points(summary[summary["metric"] == m], values, names,
                                        title=f"{m}: each run, the mean and its 95% interval",
                                        bounds=cmp.value_bounds(m, values["value"].tolist()), unit=unit_of(view.units, m),
                                        metric=m)))
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


def _survival_parts(view: View) -> tuple[pd.DataFrame, Any, Any]:
    """The survival table, the Kaplan-Meier figure and the share-collapsed-by-tick figure."""
    summary, curves = cmp.survival(view.chosen, view.labels)
    if summary.empty:
        return summary, None, None
    horizon = float(pd.to_numeric(summary["horizon"], errors="coerce").max())
    by_tick = cmp.collapsed_by_tick(view.chosen, view.labels)
    return (view.named(summary), cc.survival_curves(curves, view.names, horizon=horizon, noun=view.noun),
            cc.collapsed_by(by_tick, view.names, noun=view.noun) if not by_tick.empty else None)


def _logrank_parts(view: View) -> tuple[str, pd.DataFrame]:
    """The log-rank test between the groups in a sentence, and its pairwise table (short names)."""
    overall, pairs = cmp.logrank(view.chosen, view.labels)
    if overall["p"] is None:
        return "The log-rank test needs at least two groups with a survival time.", pairs
    sentence = (f"Log-rank test over the {overall['groups']} groups ({overall['runs']} runs): chi² = {overall['chi2']:.3g} "
                f"on {overall['df']} df, p = {overall['p']:.3g}" + (" (no group has a collapse: nothing to compare)"
                                                                      if overall["chi2"] == 0 else "") + ".")
    if not pairs.empty:
        pairs = pairs.assign(group_a=pairs["group_a"].map(view.names), group_b=pairs["group_b"].map(view.names))
    return sentence, pairs


def _survival(view: View) -> None:
    summary, figure, by_tick = _survival_parts(view)
    if summary.empty:
        st.info("These runs have no `survival_time` final metric (only scenarios that can end early report one).")
        return
    st.dataframe(summary, hide_index=True, width="stretch",
                 column_config={"share_collapsed": st.column_config.ProgressColumn("share collapsed", min_value=0,
                                                                                     max_value=1),
                                "mean_survival_time": st.column_config.NumberColumn(f"mean survival ({view.noun}s)",
                                                                                    format="%.4g"),
                                "horizon": st.column_config.NumberColumn(f"horizon ({view.noun}s)", format="%d")})
    export.chart(figure, "survival-kaplan-meier", key="cmp-survival")
    st.caption(f"Kaplan-Meier (lifelines): a run that did not collapse is censored at its last {view.noun}, so a group "
               "that never collapses is a flat line at 1.0 up to its horizon. Shaded: the curve's 95% pointwise band "
               "(Greenwood's variance on the log(-log) scale).")
    sentence, pairs = _logrank_parts(view)
    st.markdown(sentence)
    if len(pairs) > 1:
        st.dataframe(pairs, hide_index=True, width="stretch",
                     column_config={"chi2": st.column_config.NumberColumn("chi²", format="%.3g"),
                                    "p": st.column_config.NumberColumn("p", format="%.3g"),
                                    "p_holm": st.column_config.NumberColumn("p (Holm-adjusted)", format="%.3g")})
    if by_tick is not None:
        export.chart(by_tick, "share-collapsed-by-tick", key="cmp-collapsed-by")
        st.caption(f"Share of a group's runs collapsed by each {view.noun} (GovSim's figure), among the runs observed "
                   f"then (a run that ended before without collapsing no longer counts); bars: 95% Wilson interval.")


def _tick_frames(view: View, loader: Any) -> dict[str, pd.DataFrame]:
    rows = view.chosen.head(MAX_OVER_TIME)
    return {r["run_id"]: counted(loader(r)) for _, r in rows.iterrows()}


#: the click selection on the runs' points of Over time, and where the clicked run and tick are kept
PICK, OPENED = "pick", "compare_opened_tick"


def _over_time_parts(view: View, frames: dict[str, pd.DataFrame], metric: str, zero_after: bool = True,
                     select: Optional[str] = None) -> tuple[pd.DataFrame, Any]:
    groups = dict(zip(view.chosen["run_id"], view.labels))
    collapsed = cmp.collapse_ticks(view.chosen) if zero_after else None
    data = cmp.over_time(frames, groups, metric, collapsed)
    each = cmp.run_series(frames, groups, metric, collapsed)
    lines = cmp.reference_lines(view.chosen, view.labels, metric)
    return data, cc.over_time(data, view.names, metric, unit=unit_of(view.units, metric), lines=lines, noun=view.noun,
                              runs=each, select=select)


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
    c1, c2 = st.columns([3, 2])
    metric = c1.selectbox(f"Per-{view.noun} metric", metrics, key="compare_over_metric")
    set_url("metric", metric)
    init_state("compare_zero_after", url_value("alive") != "only")
    zero_after = c2.toggle("A collapsed run counts as 0 after its collapse", key="compare_zero_after",
                           help="GovSim's convention (on); off: only the runs still going are averaged")
    set_url("alive", None if zero_after else "only")
    data, figure = _over_time_parts(view, frames, metric, zero_after, select=PICK)
    export.chart(figure, f"{metric}-over-time", key="cmp-over-time", on_select=tick_view.opener("cmp-over-time", PICK, OPENED))
    zeros = int(pd.to_numeric(data["after_collapse"], errors="coerce").fillna(0).sum()) if not data.empty else 0
    st.caption(f"Thick line: the mean over a group's runs at each {view.noun}; shaded: their min-max; thin lines: each "
               "run. " + (f"A run that collapsed counts as 0 at every {view.noun} after its collapse up to its horizon "
                          f"(GovSim's convention; dotted; {zeros} such values here), so the mean does not rise as "
                          "collapsed runs drop out." if zero_after else
                          f"Only runs still going are averaged: after a collapse the mean is over fewer runs "
                          f"(`runs counted` in the tooltip)") + f" Click a run's point to open that {view.noun}.")
    wanted = (url_value("open") or "").partition(":")
    if OPENED not in st.session_state and as_int(wanted[2]) is not None:
        st.session_state[OPENED] = {"run_id": wanted[0], "tick": as_int(wanted[2])}
    opened = st.session_state.get(OPENED)
    if not opened or opened.get("run_id") not in set(view.chosen["run_id"]):
        set_url("open", None)
    else:
        set_url("open", f"{opened['run_id']}:{int(opened['tick'])}")
        at = view.chosen["run_id"] == opened["run_id"]
        row, group = view.chosen[at].iloc[0].to_dict(), view.names.get(view.labels[at].iloc[0], "")
        with st.container(border=True):
            tick_view.show(row, int(opened["tick"]), title=f"Run {row['run_id']} ({group}), {view.noun} {int(opened['tick'])}")
            if st.button("Close", key="cmp-close-tick"):
                st.session_state.pop(OPENED, None)
                set_url("open", None)
                st.rerun()


# ----- forks: the chart and the transcripts side by side --------------------------------------------------------------
def fork_families(chosen: pd.DataFrame, table: pd.DataFrame) -> dict[str, list[str]]:
    """Parent -> its forks, among the chosen runs: a chosen fork brings its parent, a chosen parent its chosen forks
    (all its forks when none is chosen)."""
    if "parent_id" not in table:
        return {}
    parents = table["parent_id"]
    ids = set(chosen["run_id"])
    families: dict[str, list[str]] = {}
    for _, r in chosen.iterrows():
        parent = r.get("parent_id")
        if isinstance(parent, str) and parent:
            families.setdefault(parent, []).append(str(r["run_id"]))
    for rid in sorted(ids):
        if rid not in families and (parents == rid).any():
            families[rid] = sorted(table.loc[parents == rid, "run_id"].astype(str))
    return {p: sorted(set(f)) for p, f in sorted(families.items())}


def _forks(view: View) -> None:
    families = fork_families(view.chosen, view.table)
    if not families:
        st.caption("No forks among the chosen runs (choose a fork, or a run that was forked: its forks come with it).")
        return
    parents = list(families)
    init_state("compare_fork_parent", url_value("parent") if url_value("parent") in parents else parents[0])
    if st.session_state["compare_fork_parent"] not in parents:
        st.session_state["compare_fork_parent"] = parents[0]
    parent = st.selectbox("Parent run", parents, key="compare_fork_parent",
                          format_func=lambda p: f"{p} ({len(families[p])} fork(s) chosen)")
    set_url("parent", parent if len(parents) > 1 else None)
    table = view.table
    forks = table[table["run_id"].isin(families[parent])]
    prow = table[table["run_id"] == parent]
    if prow.empty:
        st.warning(f"Parent run {parent} is not in the store; showing its forks only.")
    branch = pd.to_numeric(forks["branch_tick"], errors="coerce").min() if "branch_tick" in forks else None
    lines = []
    for _, r in pd.concat([prow, forks]).iterrows():
        frame = counted(q("tick_frame", r.to_dict(), r["run_id"]))
        if not frame.empty:
            frame = frame.copy()
            frame["run"] = ("parent " if r["run_id"] == parent else "fork ") + r["run_id"]
            lines.append(frame)
    if not lines:
        st.info("No ticks stored for these runs.")
        return
    frames = pd.concat(lines, ignore_index=True)
    metric_cols = [c for c in frames.columns
                   if c not in ("tick", "tick_seconds", "run") and pd.api.types.is_numeric_dtype(frames[c])]
    metric = st.selectbox(f"Metric over {view.noun}s", metric_cols, key="compare_fork_metric")
    has_branch = branch is not None and not pd.isna(branch)
    if has_branch:
        st.caption(f"Forks branch after {view.noun} {int(branch)}: up to it, their ticks are the parent's.")
    export.chart(charts.forks(frames, metric, branch if has_branch else None, unit=unit_of(view.units, metric),
                              noun=view.noun), f"{metric}-parent-and-forks", key="cmp-forks")
    if not prow.empty and not forks.empty:
        _side_by_side(view, prow.iloc[0].to_dict(), forks)


def _transcript(run: dict[str, Any], ticks: tuple[int, int]) -> dict[int, list[str]]:
    """tick -> the lines of a run's transcript in `ticks`: what was said, then each decision, in words."""
    out: dict[int, list[str]] = {}
    kinds = eq("said_kinds", run, run["run_id"])
    if kinds:
        said, _ = eq("conversation_page", run, run["run_id"], tuple(kinds), ticks=ticks, offset=0, limit=400)
        for _, m in said.iterrows():
            who = "institution" if pd.isna(m["actor"]) else f"agent {int(m['actor'])}"
            out.setdefault(int(m["tick"]), []).append(f"{who} ({m['kind']}): {m['text'] if m['text'] is not None else m['data']}")
    decisions = eq("log_page", run, run["run_id"], kinds=("decision",), ticks=ticks, offset=0, limit=400)
    for _, d in decisions.iterrows():
        flag = " [fallback]" if d["fallback"] else ""
        out.setdefault(int(d["tick"]), []).append(f"agent {d['agent']}: {action_words(d['detail'])} → payoff {d['payoff']:.4g}{flag}")
    return out


def _side_by_side(view: View, parent: dict[str, Any], forks: pd.DataFrame) -> None:
    """Concordia's two transcripts: the parent and one fork, tick by tick from the branch, in two columns; the lines
    that differ marked."""
    st.subheader("Transcripts side by side from the branch")
    ids = forks["run_id"].tolist()
    fork_id = st.selectbox("Fork", ids, key="compare_fork_side") if len(ids) > 1 else ids[0]
    fork = forks[forks["run_id"] == fork_id].iloc[0].to_dict()
    branch = int(pd.to_numeric(pd.Series([fork.get("branch_tick")]), errors="coerce").fillna(0).iloc[0])
    last = max(int(parent.get("ticks") or 0), int(fork.get("ticks") or 0))
    if last <= branch:
        st.caption("Neither run went on past the branch.")
        return
    first = branch + 1
    if last > first:
        shown = st.slider(f"{view.noun.capitalize()}s", first, last, (first, min(last, first + 2)), key="compare_fork_ticks")
    else:
        shown = (first, first)
    left, right = _transcript(parent, shown), _transcript(fork, shown)
    mine, theirs = dict(fork.get("config") or {}), dict(parent.get("config") or {})
    changed = ", ".join(f"{k}={mine.get(k)}" for k in sorted(set(mine) | set(theirs)) if mine.get(k) != theirs.get(k))
    st.caption(f"Parent {parent['run_id']} | fork {fork_id} (changed at the branch: {changed or 'nothing but its seeds'}). "
               "Lines only one side has are marked ▸, lines both have ·.")
    h1, h2 = st.columns(2)
    h1.markdown(f"**Parent {parent['run_id']}**")
    h2.markdown(f"**Fork {fork_id}**")
    for tick in range(shown[0], shown[1] + 1):
        a, b = left.get(tick, []), right.get(tick, [])
        c1, c2 = st.columns(2)
        for col, mine, theirs in ((c1, a, b), (c2, b, a)):
            with col.container(border=True):
                st.caption(f"{view.noun} {tick}")
                other = set(theirs)
                marked = [("▸ " if line not in other else "· ") + line for line in mine]  # (st.text strips a leading "  ")
                st.text("\n".join(marked) or "(nothing: the run had ended)")


TABS = {"Across seeds": _seeds, "Reward modes": _ablation, "Survival": _survival, "Over time": _over_time,
        "Forks": _forks}


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
    surv, figure, by_tick = _survival_parts(view)
    if not surv.empty:
        sentence, pairs = _logrank_parts(view)
        blocks += ["Survival", surv, figure, ("text", sentence), *([pairs] if len(pairs) > 1 else []),
                   *([by_tick] if by_tick is not None else [])]
    frames = _tick_frames(view, load)
    metrics = _over_time_metrics(view, frames)
    if metrics:
        metric = over if over in metrics else _over_time_default(view, metrics)
        _, figure = _over_time_parts(view, frames, metric)
        blocks += [f"{metric} over time", figure]
    return blocks


page(render)
