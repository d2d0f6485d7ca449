"""Norms: the timeline of stated and adopted norms, compliance, violation and sanctions (every tick of the run on
the axis, each kind always in the same colour), the compliance rate, votes on limits, the limit in force
against what agents actually took, and the sanctions."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from app_pages import charts, export
from app_pages.common import choose_run, noun, page, q, scenario_class
from sim.reward.norms import KINDS

#: one colour per norm kind, the same in every run (a kind a run lacks keeps its colour for the others)
KIND_COLOURS = dict(zip(KINDS, ("#4c78a8", "#72b7b2", "#54a24b", "#e45756", "#b279a2")))


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    st.title(f"Norms in run {run['run_id']}")
    timeline = q("norm_timeline", run, run["run_id"])
    votes = q("events", run, run["run_id"], kinds=("vote", "vote.result"), limit=20000)
    if timeline.empty and votes.empty:
        st.info("No norm was stated, adopted, kept, broken or sanctioned in this run, and no limit was voted on. "
                "(In the fishery, turn on `talk`, `sanctions` or `norm_formation`.)")
        _limit_vs_take(run)
        return
    totals = timeline.groupby("kind")["count"].sum() if not timeline.empty else pd.Series(dtype=int)
    c = st.columns(6)
    for col, kind in zip(c, KINDS):
        col.metric(f"{kind}s", int(totals.get(kind, 0)))
    judged = totals.get("compliance", 0) + totals.get("violation", 0)
    c[5].metric("compliance rate", f"{totals.get('compliance', 0) / judged:.0%}" if judged else "—")
    last = int(run.get("ticks") or 0)
    if not timeline.empty:
        full = charts.norm_counts(timeline, last, KIND_COLOURS, noun=noun(run["scenario"]))
        export.chart(full, f"{run['run_id']}-norm-events", key="norm-events")
        wide = timeline.pivot_table(index="tick", columns="kind", values="count", fill_value=0)
        wide = wide.reindex(range(1, max(last, int(wide.index.max())) + 1), fill_value=0).reset_index(names="tick")
        if {"compliance", "violation"} & set(wide.columns):
            comp = wide.get("compliance", 0)
            viol = wide.get("violation", 0)
            wide["compliance_rate"] = comp / (comp + viol).replace(0, pd.NA)
            export.chart(charts.metric(wide, "compliance_rate", unit="share", noun=noun(run["scenario"]),
                                       title=f"Compliance rate per {noun(run['scenario'])} (no point: no compliance "
                                             f"judged that {noun(run['scenario'])})"),
                         f"{run['run_id']}-compliance", key="norm-compliance")
    _limit_vs_take(run)
    _votes(votes, noun(run["scenario"]))

    header = {"tick": st.column_config.NumberColumn(noun(run["scenario"]))}  # (one word for time on every page)
    st.subheader("Stated and adopted norms")
    stated = q("events", run, run["run_id"], kinds=("norm.statement", "norm.adoption"), limit=2000)
    if stated.empty:
        st.caption("None stated.")
    else:
        st.dataframe(pd.DataFrame({
            "tick": stated["tick"], "event": stated["kind"].str.removeprefix("norm."),
            "by": stated["actor"].map(lambda a: "institution" if pd.isna(a) else f"agent {int(a)}"),
            "norm": stated["data"].map(lambda d: d.get("norm")),
            "rule": stated["data"].map(lambda d: rule_text(d.get("rule", ""))),
            "text": stated["data"].map(lambda d: d.get("text", ""))}), hide_index=True, width="stretch", column_config=header)
    st.subheader("Sanctions")
    sanctions = q("events", run, run["run_id"], kinds=("norm.sanction",), limit=2000)
    if sanctions.empty:
        st.caption("No sanction given.")
    else:
        frame = pd.DataFrame({"tick": sanctions["tick"], "sanctioner": sanctions["actor"], "target": sanctions["target"],
                              "norm": sanctions["data"].map(lambda d: d.get("norm")),
                              "cost": sanctions["data"].map(lambda d: d.get("cost")),
                              "fine": sanctions["data"].map(lambda d: d.get("fine"))})
        st.dataframe(frame, hide_index=True, width="stretch", column_config=header)
        most = frame.groupby("target").size().sort_values(ascending=False).head(10)
        st.caption("Most sanctioned: " + ", ".join(f"agent {int(t)} ({n})" for t, n in most.items()))


def _limit_vs_take(run: dict) -> None:
    """The limit in force each tick (the state's `norm`) against the mean and largest take of that tick."""
    cls = scenario_class(run["scenario"])
    phase = getattr(cls, "usage_phase", None) if cls is not None else None
    ticks = q("tick_frame", run, run["run_id"])
    if not phase or ticks.empty or "state.norm" not in ticks:
        return
    stats = q("action_stats", run, run["run_id"], phase)
    frame = ticks[["tick", "state.norm"]].rename(columns={"state.norm": "limit in force"}).merge(stats, on="tick", how="left")
    st.subheader(f"The limit in force against the actual {phase}")
    if frame["limit in force"].isna().all():
        st.caption("No limit was in force during this run (none stated or adopted).")
    units = getattr(cls, "metric_units", {}) or {}
    unit = units.get("catch_mean", "")
    figure = charts.lines(frame, ["limit in force", f"mean {phase}", f"largest {phase}"], unit=unit, noun=noun(run["scenario"]),
                          title=f"Limit per agent vs {phase} per agent{f' ({unit})' if unit else ''}")
    export.chart(figure, f"{run['run_id']}-limit", key="norm-limit")


def rule_text(rule: Any) -> str:
    """A norm's rule as words: `max_catch 8`, not `{'max_catch': 8.0}`."""
    if isinstance(rule, dict):
        return ", ".join(f"{k} {format(v, '.4g') if isinstance(v, (int, float)) and not isinstance(v, bool) else v}"
                         for k, v in rule.items())
    return str(rule)


def _votes(votes: pd.DataFrame, unit_of_time: str) -> None:
    if votes.empty:
        return
    st.subheader("Votes on a limit")
    results = votes[votes["kind"] == "vote.result"]
    if not results.empty:
        st.dataframe(pd.DataFrame({"tick": results["tick"], "winner": results["data"].map(lambda d: d.get("winner")),
                                   "adopted": results["data"].map(lambda d: d.get("adopted")),
                                   "rule": results["data"].map(lambda d: d.get("rule")),
                                   "tally": results["data"].map(lambda d: ", ".join(f"{k}: {v}" for k, v in (d.get("tally") or {}).items()))}),
                     hide_index=True, width="stretch", column_config={"tick": st.column_config.NumberColumn(unit_of_time)})
    cast = votes[votes["kind"] == "vote"]
    if not cast.empty:
        st.caption(f"{len(cast)} votes cast by {cast['actor'].nunique()} agents.")


page(render)
