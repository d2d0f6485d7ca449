"""Agents: every agent of the run with its role, strategy, persona and payoff (GovSim's per-persona view: each
agent's action and payoff over time in one chart, a table of totals, over-usage, violations and sanctions), the
LLM usage per group and model with its cost, one agent's trajectory, its decisions with the exact prompt and answer
from the LLM call log (fallbacks highlighted), and its memory and relationships; and the interviews and surveys
asked of the run's agents (`societas interview`, `survey`)."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from analysis.model_usage import usage_rows
from app_pages import charts, export
from app_pages.common import choose_agent, choose_run, over_usage, page, q, scenario_class, url_tabs

MAX_LINES = 40
#: agent steps above which the over-usage count waits to be asked for (it reads every decision)
BIG_RUN = 200_000


def _short(value: object, limit: int = 120) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _highlight(row: pd.Series) -> list[str]:
    return ["background-color: #ffd7d7" if row.get("fallback") else "" for _ in row]


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    st.title(f"Agents of run {run['run_id']}")
    agents = q("run_agents", run, run["run_id"])
    if agents.empty:
        st.info("This run has no agent steps yet.")
        return
    tabs = url_tabs(["All agents", "One agent", "Interviews and surveys"], "agents_tab")
    if tabs[0].open is not False:
        with tabs[0]:
            _all(run, agents)
    if tabs[1].open is not False:
        with tabs[1]:
            _one(run, agents)
    if tabs[2].open is not False:
        with tabs[2]:
            _studies(run, table)


def _all(run: dict, agents: pd.DataFrame) -> None:
    """Every agent: who it is, its totals, over-usage, violations and sanctions; action and payoff over time."""
    totals = q("agent_totals", run, run["run_id"])
    detail = q("get_run", run, run["run_id"]) or {}
    cls = scenario_class(run["scenario"])
    usage = None
    if getattr(cls, "usage_phase", None):
        big = len(agents) * int(run.get("ticks") or 0) > BIG_RUN
        if not big or st.toggle("Count over-usage", help=f"reads every `{cls.usage_phase}` decision of the run: "
                                                          "seconds on a run of a million agent steps"):
            usage = over_usage(run, detail.get("config") or {})
    frame = agents.merge(totals, on="agent_id", how="left")
    if usage is not None:
        frame = frame.merge(usage, on="agent_id", how="left")
    roles = ", ".join(f"{n} {r}" for r, n in frame["role"].value_counts().items())
    st.caption(f"{len(frame)} agents took part ({roles})"
               + (f"; {int((frame['joined'] > 0).sum())} joined after the start" if (frame["joined"] > 0).any() else ""))
    shown = [c for c in ("agent_id", "role", "name", "policy", "strategy", "persona", "generation", "joined", "ticks", "payoff",
                         "reward", "over_usage", "usage_decisions", "violations", "sanctions_received", "sanctions_given",
                         "fallbacks") if c in frame]
    st.dataframe(frame[shown], hide_index=True, width="stretch",
                 column_config={"payoff": st.column_config.NumberColumn("total payoff", format="%.4g"),
                                "reward": st.column_config.NumberColumn("total reward", format="%.4g"),
                                "over_usage": st.column_config.NumberColumn("over-usage", help="decisions above the "
                                                                            "sustainable share of their tick"),
                                "joined": st.column_config.NumberColumn("joined at tick", help="0: from the start")})
    ids = frame.sort_values("payoff", ascending=False)["agent_id"].astype(int).tolist()
    if len(ids) > MAX_LINES:
        st.caption(f"The chart draws the {MAX_LINES} agents with the highest total payoff; pick others below.")
    labels = dict(zip(frame["agent_id"].astype(int), frame["label"]))
    chosen = st.multiselect("Agents in the chart", ids, default=sorted(ids[:MAX_LINES]), format_func=lambda a: labels[a],
                            key="agents_compared")
    if not chosen:
        return
    phase = getattr(cls, "usage_phase", None) if cls is not None else None
    series = q("agent_series", run, run["run_id"], tuple(sorted(chosen)), phase)
    series["agent"] = series["agent_id"].map(labels)
    if series["action"].notna().any():
        export.chart(charts.per_agent(series, "action", title=f"Action per tick ({phase or 'first numeric phase'})"),
                     f"{run['run_id']}-actions", key="agents-actions")
    else:
        st.caption("These agents' actions are not numbers: see each one's decisions in **One agent**.")
    export.chart(charts.per_agent(series, "payoff", title="Payoff per tick"), f"{run['run_id']}-payoffs", key="agents-payoffs")
    _usage(run, detail)


def _usage(run: dict, detail: dict) -> None:
    """LLM calls, tokens, latency, fallbacks and cost per group and model (analysis.model_usage)."""
    usage = q("llm_usage", run, (run["run_id"],))
    if not usage:
        return
    rows = pd.DataFrame(usage_rows(usage, detail.get("spec") or {"scenario": run["scenario"]}))
    st.subheader("LLM usage by group and model")
    cost = None if rows["cost"].isna().any() else float(rows["cost"].sum())
    st.caption("Cost from the price table (analysis/prices.yaml, or $SOCIETAS_PRICES): "
               + (f"{cost:.4g}" if cost is not None else "a model has no price") + "; cache hits cost nothing.")
    st.dataframe(rows.drop(columns=["model_id"]), hide_index=True, width="stretch")


def _studies(run: dict, table: pd.DataFrame) -> None:
    """The interviews and surveys of this run: each question with its answers, newest first."""
    asked = int((table["parent_id"] == run["run_id"]).sum()) if "parent_id" in table else 0
    found = q("studies", {"run_id": run["run_id"], "ticks": asked, "status": "studies"}, run["run_id"])
    if not found:
        st.info(f"No interview or survey of this run yet: `societas interview {run['run_id']} \"QUESTION\" --agent ID` "
                f"or `societas survey {run['run_id']} \"QUESTION\" --likert` asks its LLM agents from their state at a tick.")
        return
    for study in found:
        with st.expander(f"{study['kind']} at tick {study['tick']}: {study['question'][:80]}", expanded=study is found[0]):
            st.text(study["question"])  # (plain text: a question is not markdown)
            answers = pd.DataFrame(study["answers"])
            shown = [c for c in ("agent_id", "group", "model", "answer", "score", "fallback", "cached") if c in answers]
            st.dataframe(answers[shown], hide_index=True, width="stretch")
            if study["counts"]:
                st.bar_chart(pd.Series(study["counts"], name="answers"), horizontal=True)
            st.caption(f"stored as run {study['study_id']}")


def _one(run: dict, agents: pd.DataFrame) -> None:
    labels = dict(zip(agents["agent_id"].astype(int), agents["label"]))
    agent = choose_agent(sorted(labels), labels, label=f"Agent ({len(labels)} agents)")
    steps = q("agent_trajectory", run, run["run_id"], int(agent))
    if steps.empty:
        st.info(f"Agent {agent} has no stored steps.")
        return
    who = agents[agents["agent_id"] == agent].iloc[0].to_dict()
    st.text(f"{labels[agent]}" + (f" — persona: {who['persona']}" if who.get("persona") else ""))  # (not markdown)
    c = st.columns(5)
    c[0].metric("backend", steps["backend"].iloc[-1])
    c[1].metric("ticks", len(steps))
    c[2].metric("total payoff", f"{steps['payoff'].sum():.4g}")
    c[3].metric("total reward", f"{steps['reward'].sum():.4g}")
    c[4].metric("fallback ticks", int(steps["fallback"].sum()))

    same = bool((steps["payoff"] - steps["reward"]).abs().max() < 1e-12)
    if same:
        st.altair_chart(charts.lines(steps, ["payoff"], title=f"Agent {agent}: payoff per tick"), width="stretch")
        st.caption("The reward equals the payoff at every tick (the private reward mode), so one line shows both.")
    else:
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
