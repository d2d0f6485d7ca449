"""Policies: the programs an LLM wrote under --policy synthesis (the grid games), each version with its checks,
its episode's scores and what went wrong when the sandbox ran it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from app_pages import charts, export
from app_pages.common import choose_run, page, q, sandbox_note, units

SCORES = ["iteration", "program", "reward", "efficiency", "equality", "sustainability", "peace", "incidents"]


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    st.title(f"Policies of run {run['run_id']}")
    sandbox_note(run)
    codes, scores, incidents = q("policy_versions", run, run["run_id"])
    if codes.empty:
        st.info("This run has no synthesised policy: run a grid game with `--policy synthesis` "
                "(e.g. `societas run cleanup --policy synthesis --set iterations=3`).")
        return
    accepted = int((codes["status"] == "accepted").sum())
    c1, c2, c3 = st.columns(3)
    c1.metric("Versions written", len(codes))
    c2.metric("Accepted", accepted)
    c3.metric("Incidents", int(scores["incidents"].sum()) if not scores.empty else 0)
    if not scores.empty:
        st.subheader("Scores by iteration")
        shown = scores[[c for c in SCORES if c in scores.columns]]
        st.dataframe(shown, hide_index=True, width="stretch",
                     column_config={c: st.column_config.NumberColumn(c, format="%.4g")
                                    for c in ("reward", "efficiency", "equality", "sustainability", "peace") if c in shown})
        unit = units(run["scenario"]).get("payoff", "")
        export.chart(charts.scores(scores, ["reward"], title="Reward per agent of each iteration's episode",
                                   unit=f"reward per agent ({unit})" if unit else "reward per agent"),
                     f"{run['run_id']}-policy-reward", key="policy-reward")
        rest = [c for c in ("efficiency", "equality", "sustainability", "peace") if c in scores and scores[c].notna().any()]
        if rest:
            export.chart(charts.scores(scores, rest, title="Perolat's four over iterations (each episode)"),
                         f"{run['run_id']}-policy-perolat", key="policy-perolat")
    st.subheader("Every version")
    for _, row in codes.iterrows():
        head = (f"iteration {row['iteration']}, attempt {row['attempt']}: {row['status']}"
                f"{' (LLM call failed: default code)' if row.get('fallback') else ''} — tick {row['tick']}")
        with st.expander(head, expanded=row["status"] == "accepted"):
            if row.get("problems"):
                # (a warning, not an error: a refused version is the run's record, not the page failing)
                st.warning("Refused: " + "; ".join(map(str, row["problems"])), icon=":material/block:")
            if row.get("hacks"):
                st.warning("Reward-hacking attempts: " + "; ".join(map(str, row["hacks"])))
            st.code(row.get("code") or "(no program in the answer)", language="python")
            with st.popover("The LLM's whole answer"):
                st.text(row.get("answer") or "")
    if not incidents.empty:
        st.subheader("Incidents (the first of each kind per episode)")
        cols = [c for c in ("tick", "iteration", "step", "incident", "program", "reason") if c in incidents.columns]
        st.dataframe(incidents[cols], hide_index=True, width="stretch")


page(render)
