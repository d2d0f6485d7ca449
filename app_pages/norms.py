"""Norms: the timeline of stated norms, compliance and violation, the compliance rate, and sanctions."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages import charts
from app_pages.common import choose_run, page, q


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    st.title(f"Norms in run {run['run_id']}")
    timeline = q("norm_timeline", run, run["run_id"])
    if timeline.empty:
        st.info("No norm was stated, kept, broken or sanctioned in this run. (In the fishery, turn on `talk` or `sanctions`.)")
        return
    totals = timeline.groupby("kind")["count"].sum()
    c = st.columns(5)
    for col, kind in zip(c, ("statement", "compliance", "violation", "sanction")):  # (and any other norm.* kind in the chart)
        col.metric(f"{kind}s", int(totals.get(kind, 0)))
    judged = totals.get("compliance", 0) + totals.get("violation", 0)
    c[4].metric("compliance rate", f"{totals.get('compliance', 0) / judged:.0%}" if judged else "—")
    st.altair_chart(charts.stacked_counts(timeline, x="tick", color="kind", title="Norm events per tick"), width="stretch")
    wide = timeline.pivot_table(index="tick", columns="kind", values="count", fill_value=0).reset_index()
    if {"compliance", "violation"} & set(wide.columns):
        comp = wide.get("compliance", 0)
        viol = wide.get("violation", 0)
        wide["compliance_rate"] = comp / (comp + viol).replace(0, pd.NA)
        st.altair_chart(charts.lines(wide, ["compliance_rate"], title="Compliance rate per tick"), width="stretch")

    st.subheader("Stated and adopted norms")
    stated = q("events", run, run["run_id"], kinds=("norm.statement", "norm.adoption"), limit=2000)
    if stated.empty:
        st.caption("None stated.")
    else:
        st.dataframe(pd.DataFrame({
            "tick": stated["tick"], "event": stated["kind"].str.removeprefix("norm."),
            "by": stated["actor"].map(lambda a: "institution" if pd.isna(a) else f"agent {int(a)}"),
            "norm": stated["data"].map(lambda d: d.get("norm")), "rule": stated["data"].map(lambda d: str(d.get("rule", ""))),
            "text": stated["data"].map(lambda d: d.get("text", ""))}), hide_index=True, width="stretch")
    st.subheader("Sanctions")
    sanctions = q("events", run, run["run_id"], kinds=("norm.sanction",), limit=2000)
    if sanctions.empty:
        st.caption("No sanction given.")
    else:
        frame = pd.DataFrame({"tick": sanctions["tick"], "sanctioner": sanctions["actor"], "target": sanctions["target"],
                              "norm": sanctions["data"].map(lambda d: d.get("norm")),
                              "cost": sanctions["data"].map(lambda d: d.get("cost")),
                              "fine": sanctions["data"].map(lambda d: d.get("fine"))})
        st.dataframe(frame, hide_index=True, width="stretch")
        most = frame.groupby("target").size().sort_values(ascending=False).head(10)
        st.caption("Most sanctioned: " + ", ".join(f"agent {int(t)} ({n})" for t, n in most.items()))


page(render)
