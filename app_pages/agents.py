"""Agents: one agent's trajectory (actions, payoffs, rewards), its decisions with the exact
prompt and answer from the LLM call log (fallbacks highlighted), and its memory and relationships."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from app_pages import charts
from app_pages.common import choose_run, page, q


def _short(value: object, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _highlight(row: pd.Series) -> list[str]:
    return ["background-color: #ffd7d7" if row.get("fallback") else "" for _ in row]


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    st.title(f"Agents of run {run['run_id']}")
    index = q("agent_index", run, run["run_id"])
    if not index["count"]:
        st.info("This run has no agent steps yet.")
        return
    if index["ids"]:
        agent = st.selectbox(f"Agent ({index['count']} agents)", index["ids"])
    else:
        agent = int(st.number_input(f"Agent id ({index['count']} agents, {index['min']}..{index['max']})",
                                    min_value=int(index["min"]), max_value=int(index["max"]), value=int(index["min"])))
    steps = q("agent_trajectory", run, run["run_id"], int(agent))
    if steps.empty:
        st.info(f"Agent {agent} has no stored steps.")
        return
    c = st.columns(5)
    c[0].metric("backend", steps["backend"].iloc[-1])
    c[1].metric("ticks", len(steps))
    c[2].metric("total payoff", f"{steps['payoff'].sum():.4g}")
    c[3].metric("total reward", f"{steps['reward'].sum():.4g}")
    c[4].metric("fallback ticks", int(steps["fallback"].sum()))

    st.altair_chart(charts.lines(steps, ["payoff", "reward"], title=f"Agent {agent}: payoff and reward per tick"),
                    width="stretch")
    phases = sorted({p for a in steps["action"] for p in (a or {})})
    actions = pd.DataFrame({"tick": steps["tick"], **{p: steps["action"].map(lambda a, p=p: _short(a.get(p)) if p in a else "")
                                                       for p in phases},
                            "payoff": steps["payoff"], "reward": steps["reward"], "fallback": steps["fallback"],
                            "reason": steps["reason"].fillna("")})
    numeric = [p for p in phases if pd.to_numeric(steps["action"].map(lambda a, p=p: a.get(p)), errors="coerce").notna().all()]
    if numeric:
        frame = pd.DataFrame({"tick": steps["tick"], **{p: pd.to_numeric(steps["action"].map(lambda a, p=p: a.get(p)))
                                                        for p in numeric}})
        st.altair_chart(charts.lines(frame, numeric, title="Numeric actions"), width="stretch")
    st.subheader("Decisions")
    st.caption("Rows in red are fallbacks: the LLM's answer was outside the action space and the default was used.")
    st.dataframe(actions.style.apply(_highlight, axis=1), hide_index=True, width="stretch")

    calls = q("agent_llm_calls", run, run["run_id"], int(agent))
    st.subheader("LLM calls")
    if calls.empty:
        st.caption("No LLM calls: this agent is scripted (or its decisions were not logged).")
    else:
        only_fallbacks = st.toggle("Only fallbacks", value=False)
        shown = calls[calls["fallback"]] if only_fallbacks else calls
        hits, falls = int(calls["cache_hit"].sum()), int(calls["fallback"].sum())
        st.caption(f"{len(calls)} calls, {hits} from the cache, {falls} fallbacks; "
                   f"tokens in/out {int(calls['tokens_in'].sum())}/{int(calls['tokens_out'].sum())}")
        for _, call in shown.head(200).iterrows():
            flag = " · :red[FALLBACK]" if call["fallback"] else ""
            hit = " · cache hit" if call["cache_hit"] else ""
            with st.expander(f"tick {call['tick']} · {call['phase']} · {call['model_id']}{hit}{flag}"):
                st.markdown("**Prompt**")
                st.code(call["prompt"], language=None, wrap_lines=True)
                st.markdown("**Answer**")
                st.code(call["answer"], language=None, wrap_lines=True)
                value = json.dumps(call["value"], default=str)
                st.caption(f"value {value} · tokens {call['tokens_in']}/{call['tokens_out']} · "
                           f"{call['latency_s']:.3f}s · attempts {call['attempts']}")
        if len(shown) > 200:
            st.caption(f"Showing the first 200 of {len(shown)} calls.")

    st.subheader("Memory and relationships")
    snaps = steps[steps["memory"].map(bool)]
    if snaps.empty:
        st.caption("No memory stored (scripted agents keep none).")
        return
    ticks = snaps["tick"].tolist()
    at = st.select_slider("Memory as of tick", ticks, value=ticks[-1]) if len(ticks) > 1 else ticks[0]
    mem = snaps[snaps["tick"] <= at].iloc[-1]["memory"]
    if mem.get("summary"):
        st.markdown(f"**Summary of older memories:** {mem['summary']}")
    items = pd.DataFrame(mem.get("items") or [])
    if not items.empty:
        st.dataframe(items, hide_index=True, width="stretch")
    rel = mem.get("relationships") or {}
    if rel:
        rel_df = pd.DataFrame([{"peer": int(k), "trust": v} for k, v in rel.items()])
        st.altair_chart(charts.trust(rel_df), width="stretch")


page(render)
