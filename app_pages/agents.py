"""Agents: every agent of the run with its role, strategy, persona and payoff (GovSim's per-persona view: each
agent's action and payoff over time in one chart, a table of totals, over-usage, violations and sanctions; the
agents' reward vectors summed, Sotopia's per-agent scores), the LLM usage per group and model with its cost, and one
agent's log: its trajectory, its reward vector over time, its decisions with the exact prompt and answer from the
LLM call log (fallbacks highlighted), and its memory over time (Concordia's memory timeline) and relationships; and
the interviews and surveys asked of the run's agents (`societas interview`, `survey`)."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from analysis import memories
from analysis.model_usage import usage_rows
from analysis.vectors import vector_totals
from app_pages import charts, export, tables
from app_pages.common import choose_agent, choose_run, noun, over_usage, page, q, scenario_class, units, url_tabs, vq

MAX_LINES = 40
#: agent steps above which the over-usage count and the reward vectors wait to be asked for (they read every step)
BIG_RUN = 200_000


def _short(value: object, limit: int = 120) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
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


def _big(run: dict, agents: pd.DataFrame) -> bool:
    return len(agents) * int(run.get("ticks") or 0) > BIG_RUN


def _all(run: dict, agents: pd.DataFrame) -> None:
    """Every agent: who it is, its totals, over-usage, violations and sanctions; action and payoff over time."""
    totals = q("agent_totals", run, run["run_id"])
    detail = q("get_run", run, run["run_id"]) or {}
    cls = scenario_class(run["scenario"])
    unit, unit_of_time = units(run["scenario"]), noun(run["scenario"])
    usage = None
    if getattr(cls, "usage_phase", None):
        if not _big(run, agents) or st.toggle("Count over-usage", help=f"reads every `{cls.usage_phase}` decision of the "
                                                                         "run: seconds on a run of a million agent steps"):
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
    pay = f" ({unit['payoff']})" if unit.get("payoff") else ""
    phase = getattr(cls, "usage_phase", None) if cls is not None else None
    late = bool((frame["joined"] > 0).any()) if "joined" in frame else False
    tables.table(frame.sort_values("agent_id")[[c for c in shown if c != "joined" or late]], column_config={
        "agent_id": st.column_config.NumberColumn("agent", pinned=True, format="%d"),
        "payoff": st.column_config.NumberColumn(f"payoff{pay}", format="%.4g", help="total over the run"),
        "reward": st.column_config.NumberColumn("reward", format="%.4g", help="total over the run"),
        "ticks": st.column_config.NumberColumn(f"{unit_of_time}s", format="%d"),
        "generation": st.column_config.NumberColumn("gen.", format="%d", help="generation"),
        "over_usage": st.column_config.NumberColumn("over-use", help="decisions above the sustainable share of their tick"),
        "usage_decisions": st.column_config.NumberColumn(f"{phase or 'usage'}s", help=f"`{phase}` decisions counted"),
        "sanctions_received": st.column_config.NumberColumn("sanctioned", help="sanctions received"),
        "sanctions_given": st.column_config.NumberColumn("sanctioning", help="sanctions given"),
        "joined": st.column_config.NumberColumn(f"joined at {unit_of_time}", help="0: from the start", format="%d")})
    ids = frame.sort_values("payoff", ascending=False)["agent_id"].astype(int).tolist()
    if len(ids) > MAX_LINES:
        st.caption(f"The chart draws the {MAX_LINES} agents with the highest total payoff; pick others below.")
    labels = dict(zip(frame["agent_id"].astype(int), frame["label"]))
    chosen = st.multiselect("Agents in the chart", sorted(ids), default=sorted(ids[:MAX_LINES]),
                            format_func=lambda a: labels[a], key="agents_compared")
    if not chosen:
        return
    series = q("agent_series", run, run["run_id"], tuple(sorted(chosen)), phase).copy()
    series["agent"] = series["agent_id"].map(labels)
    order = [labels[a] for a in sorted(chosen)]  # agent 2 before agent 10
    if series["action"].notna().any():
        named = {k: v for k, v in unit.items() if k.startswith("action.")}
        action_unit = unit.get(f"action.{phase}", "") if phase else (next(iter(named.values())) if len(named) == 1 else "")
        export.chart(charts.per_agent(series, "action", title=f"Action per {unit_of_time} ({phase or 'first numeric phase'})",
                                      unit=action_unit, noun=unit_of_time, order=order, label=phase or "action"),
                     f"{run['run_id']}-actions", key="agents-actions")
    else:
        st.caption("These agents' actions are not numbers: see each one's decisions in **One agent**.")
    export.chart(charts.per_agent(series, "payoff", title=f"Payoff per {unit_of_time}", unit=unit.get("payoff", ""),
                                  noun=unit_of_time, order=order), f"{run['run_id']}-payoffs", key="agents-payoffs")
    _vector_table(run, agents, labels)
    _usage(run, detail)


def _vectors(run: dict, agents: pd.DataFrame, ids: tuple[int, ...] | None) -> pd.DataFrame | None:
    """The reward vectors of these agents (all with None), None when the run is big and they were not asked for."""
    if _big(run, agents) and not st.toggle("Read the reward vectors", key=f"vectors-{ids is None}",
                                           help="reads every agent step of the run: seconds on a million steps"):
        return None
    return vq("reward_vectors", run, run["run_id"], ids)


def _vector_table(run: dict, agents: pd.DataFrame, labels: dict[int, str]) -> None:
    """Sotopia's per-agent, per-dimension scores: each reward component summed over the run, per agent."""
    st.subheader("Reward vectors: each component summed over the run")
    st.caption("Each agent's score on every dimension the reward layer records (Sotopia's per-agent scores).")
    vectors = _vectors(run, agents, None)
    if vectors is None:
        return
    if vectors.empty:
        st.caption("This run stored no reward vectors (runs made before decision contract 7).")
        return
    totals = vector_totals(vectors)
    totals.insert(1, "agent", totals["agent_id"].map(labels))
    comps = [c for c in totals.columns if c not in ("agent_id", "agent")]
    tables.table(totals, column_config={c: st.column_config.NumberColumn(c, format="%.4g") for c in comps})
    weights = (q("get_run", run, run["run_id"]) or {}).get("config", {}).get("reward_weights") or {"payoff": 1}
    st.caption("The reward is " + " + ".join(f"{w:g} × {c}" for c, w in weights.items())
               + " per tick, then the reward mode; the other components are recorded beside it (docs/learning.md).")


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
    tables.table(rows.drop(columns=["model_id"]), pin="group")


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
            tables.table(answers[shown])
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
    unit, unit_of_time = units(run["scenario"]), noun(run["scenario"])
    who = agents[agents["agent_id"] == agent].iloc[0].to_dict()
    st.text(f"{labels[agent]}" + (f" — persona: {who['persona']}" if who.get("persona") else ""))  # (not markdown)
    c = st.columns(5)
    c[0].metric("backend", steps["backend"].iloc[-1])
    c[1].metric(f"{unit_of_time}s", len(steps))
    c[2].metric("total payoff" + (f" ({unit['payoff']})" if unit.get("payoff") else ""), f"{steps['payoff'].sum():.4g}")
    c[3].metric("total reward", f"{steps['reward'].sum():.4g}")
    c[4].metric(f"fallback {unit_of_time}s", int(steps["fallback"].sum()))

    same = bool((steps["payoff"] - steps["reward"]).abs().max() < 1e-12)
    if same:
        export.chart(charts.lines(steps, ["payoff"], title=f"Agent {agent}: payoff per {unit_of_time}",
                                  unit=unit.get("payoff", ""), noun=unit_of_time), f"{run['run_id']}-agent{agent}-payoff",
                     key="agent-payoff")
        st.caption("The reward equals the payoff at every tick (the private reward mode), so one line shows both.")
    else:
        export.chart(charts.lines(steps, ["payoff", "reward"], title=f"Agent {agent}: payoff and reward per {unit_of_time}",
                                  unit=unit.get("payoff", ""), noun=unit_of_time), f"{run['run_id']}-agent{agent}-payoff",
                     key="agent-payoff")
    _reward_vector(run, agents, agent, unit_of_time)
    phases = sorted({p for a in steps["action"] for p in (a or {})})
    numeric = [p for p in phases if pd.to_numeric(steps["action"].map(lambda a, p=p: a.get(p)), errors="coerce").notna().all()]
    if numeric:
        frame = pd.DataFrame({"tick": steps["tick"], **{p: pd.to_numeric(steps["action"].map(lambda a, p=p: a.get(p)))
                                                        for p in numeric}})
        action_units = {unit.get(f"action.{p}", "") for p in numeric}
        export.chart(charts.lines(frame, numeric, title="Numeric actions", noun=unit_of_time,
                                  unit=action_units.pop() if len(action_units) == 1 else ""),
                     f"{run['run_id']}-agent{agent}-actions", key="agent-actions")
    _decisions(steps, phases, unit_of_time)
    _calls(run, agent, unit_of_time)
    _memory(run, steps, unit_of_time)


def _reward_vector(run: dict, agents: pd.DataFrame, agent: int, unit_of_time: str) -> None:
    """This agent's reward vector over time: one small chart per component (their scales differ: a catch in tons, a
    violation count), the weighted ones first."""
    vectors = _vectors(run, agents, (int(agent),))
    if vectors is None or vectors.empty:
        if vectors is not None:
            st.caption("No reward vector stored for this agent (runs made before decision contract 7).")
        return
    weights = (q("get_run", run, run["run_id"]) or {}).get("config", {}).get("reward_weights") or {"payoff": 1}
    comps = sorted(vectors["component"].unique(), key=lambda c: (c not in weights, c))
    st.subheader("Reward vector over time")
    st.caption("Each component the reward layer recorded for this agent at every tick (0 where it had none); the reward "
               "weighs " + ", ".join(f"{c} × {w:g}" for c, w in weights.items()) + ".")
    export.chart(charts.components(vectors, comps, title=f"Agent {agent}: reward components per {unit_of_time}",
                                   noun=unit_of_time, weighted=tuple(weights)),
                 f"{run['run_id']}-agent{agent}-reward-vector", key="agent-vector")


def _decisions(steps: pd.DataFrame, phases: list[str], unit_of_time: str) -> None:
    actions = pd.DataFrame({"tick": steps["tick"], **{p: steps["action"].map(lambda a, p=p: _short(a.get(p)) if p in a else "")
                                                       for p in phases},
                            "payoff": steps["payoff"], "reward": steps["reward"], "fallback": steps["fallback"],
                            "reason": steps["reason"].fillna("")})
    st.subheader("Decisions")
    st.caption("Rows in red are fallbacks: the LLM's answer was outside the action space and the default was used.")
    styled = actions.style.apply(_highlight, axis=1).format({"payoff": "{:.4g}", "reward": "{:.4g}"})
    st.dataframe(styled, hide_index=True, width="stretch", height=tables.height(len(actions)),
                 column_config={"tick": st.column_config.NumberColumn(unit_of_time, pinned=True)})


def _calls(run: dict, agent: int, unit_of_time: str) -> None:
    calls = q("agent_llm_calls", run, run["run_id"], int(agent))
    st.subheader("LLM calls")
    if calls.empty:
        st.caption("No LLM calls: this agent is scripted (or its decisions were not logged).")
        return
    only_fallbacks = st.toggle("Only fallbacks", value=False)
    shown = calls[calls["fallback"]] if only_fallbacks else calls
    hits, falls = int(calls["cache_hit"].sum()), int(calls["fallback"].sum())
    st.caption(f"{len(calls)} calls, {hits} from the cache, {falls} fallbacks; "
               f"tokens in/out {int(calls['tokens_in'].sum())}/{int(calls['tokens_out'].sum())}")
    for _, call in shown.head(200).iterrows():
        flag = " · :red[FALLBACK]" if call["fallback"] else ""
        hit = " · cache hit" if call["cache_hit"] else ""
        with st.expander(f"{unit_of_time} {call['tick']} · {call['phase']} · {call['model_id']}{hit}{flag}"):
            st.markdown("**Prompt**")
            st.code(call["prompt"], language=None, wrap_lines=True)
            st.markdown("**Answer**")
            st.code(call["answer"], language=None, wrap_lines=True)
            value = json.dumps(call["value"], default=str)
            st.caption(f"value {value} · tokens {call['tokens_in']}/{call['tokens_out']} · "
                       f"{call['latency_s']:.3f}s · attempts {call['attempts']}")
    if len(shown) > 200:
        st.caption(f"Showing the first 200 of {len(shown)} calls.")


def _memory(run: dict, steps: pd.DataFrame, unit_of_time: str) -> None:
    """Concordia's memory timeline: when each item entered the agent's memory and how long it was held; the memory as
    of a chosen tick; its trust in peers."""
    st.subheader("Memory over time")
    snaps = steps[steps["memory"].map(bool)]
    if snaps.empty:
        st.caption("No memory stored (this agent keeps none).")
        return
    pairs = list(zip(snaps["tick"].astype(int), snaps["memory"]))
    timeline = memories.memory_timeline(pairs, int(run.get("ticks") or steps["tick"].max()))
    if not timeline.empty:
        export.chart(charts.memory_timeline(timeline, noun=unit_of_time), f"{run['run_id']}-memory", key="agent-memory")
        st.caption(f"Each bar: one memory item, from the {unit_of_time} it entered to the last {unit_of_time} the agent "
                   "still held it (a memory keeps a window of recent items; older ones go into its summary).")
    ticks = snaps["tick"].tolist()
    at = st.select_slider(f"Memory as of {unit_of_time}", ticks, value=ticks[-1]) if len(ticks) > 1 else ticks[0]
    mem = snaps[snaps["tick"] <= at].iloc[-1]["memory"]
    if mem.get("summary"):
        st.markdown("**Summary of older memories:**")
        st.text(mem["summary"])
    items = pd.DataFrame(mem.get("items") or [])
    if not items.empty:
        tables.table(items, pin="tick", column_config={"tick": st.column_config.NumberColumn(unit_of_time, pinned=True)})
    rel = mem.get("relationships") or {}
    if rel:
        rel_df = pd.DataFrame([{"peer": int(k), "trust": v} for k, v in rel.items()])
        export.chart(charts.trust(rel_df), f"{run['run_id']}-trust", key="agent-trust")


page(render)
