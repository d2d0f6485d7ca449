"""One tick of a run opened in place (GovSim's viewer: click a month of a chart, read that month): what was said,
each agent's decision with its payoff, and the exact prompts and answers of the tick's LLM calls.

What agents (or their LLMs) wrote is shown as plain text (`st.text`, `st.code`), never as markdown."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Optional

import pandas as pd
import streamlit as st

from app_pages.common import eq, noun, q, scenario_class
from app_pages.said import action_words, addressee, structured_line, who

#: what one tick shows at most of each part
SAID, CALLS = 200, 60
#: the toggle (one a run) that shows a tick's prompts where they come on demand
PROMPTS = "tick-prompts"


def selected_tick(state: Any, name: str) -> Optional[dict[str, Any]]:
    """The point a chart's click selection `name` holds (its fields: `tick`, perhaps `run_id`), or None."""
    selection = getattr(state, "selection", None) or (state.get("selection") if isinstance(state, dict) else None) or {}
    points = selection.get(name) if isinstance(selection, dict) else None
    if not points:
        return None
    point = points[0] if isinstance(points, list) else points
    return point if isinstance(point, dict) and point.get("tick") is not None else None


def opener(key: str, name: str, target: str, run_id: Optional[str] = None) -> Callable[[], None]:
    """A chart's `on_select` callback: the clicked point's tick (and run) go to session_state[target], and the
    replay cursor moves to that tick (every page opens there)."""
    def on_click() -> None:
        point = selected_tick(st.session_state.get(f"chart-{key}"), name)
        if point is None:
            return
        tick = int(point["tick"])
        st.session_state[target] = {"tick": tick, "run_id": point.get("run_id") or run_id}
        if not point.get("run_id") or point.get("run_id") == run_id:
            st.session_state["cursor_tick"] = tick
            st.session_state["cursor_slider"] = tick
    return on_click


def _said(run: dict[str, Any], tick: int) -> None:
    kinds = eq("said_kinds", run, run["run_id"])
    said, total = (eq("conversation_page", run, run["run_id"], tuple(kinds), ticks=(tick, tick), offset=0, limit=SAID)
                   if kinds else (pd.DataFrame(), 0))
    if said.empty:
        st.caption("Nobody said anything this " + noun(run["scenario"]) + ".")
        return
    st.caption(f"{total} message(s)" + (f"; the first {SAID}" if total > SAID else ""))
    for _, m in said.iterrows():
        data = m["data"] if isinstance(m["data"], dict) else {}
        with st.chat_message("user", avatar=":material/person:"):
            st.text(f"{who(m['actor'])} → {addressee(m['target'], data)} · {m['kind']}")
            line = structured_line(str(m["kind"]), m["actor"], m["target"], data)
            st.text(line if line is not None else str(m["text"] or ""))


def _decisions(run: dict[str, Any], tick: int) -> None:
    rows = eq("log_page", run, run["run_id"], kinds=("decision",), ticks=(tick, tick), offset=0, limit=500)
    if rows.empty:
        st.caption(f"No decision stored at this {noun(run['scenario'])}.")
        return
    shown = rows[["agent", "kind", "detail", "payoff", "reward", "fallback", "reason"]].rename(
        columns={"kind": "backend", "detail": "action"})
    shown["action"] = shown["action"].map(action_words)
    st.dataframe(shown, hide_index=True, width="stretch",
                 column_config={"payoff": st.column_config.NumberColumn(format="%.4g"),
                                "reward": st.column_config.NumberColumn(format="%.4g")})


def _prompts(run: dict[str, Any], tick: int) -> None:
    calls = q("llm_calls_at", run, run["run_id"], int(tick))
    if calls.empty:
        st.caption(f"No LLM call at this {noun(run['scenario'])} (scripted agents decide without one).")
        return
    phases = sorted(calls["phase"].astype(str).unique())
    usage = getattr(scenario_class(run["scenario"]), "usage_phase", None)  # (the fishery's harvest first: GovSim's)
    phases.sort(key=lambda p: p != usage)
    phase = st.radio("Phase", phases, horizontal=True, key=f"tick-phase-{run['run_id']}-{tick}") if len(phases) > 1 else phases[0]
    part = calls[calls["phase"].astype(str) == phase]
    st.caption(f"{len(part)} call(s) in phase {phase}" + (f"; the first {CALLS}" if len(part) > CALLS else ""))
    for i, (_, call) in enumerate(part.head(CALLS).iterrows()):
        flag = " · FALLBACK" if call["fallback"] else ""
        with st.expander(f"agent {int(call['agent_id'])} · {call['model_id']}{' · cache hit' if call['cache_hit'] else ''}{flag}",
                         expanded=i == 0):
            st.code(call["prompt"], language=None, wrap_lines=True)
            st.markdown("**Answer**")
            st.code(call["answer"], language=None, wrap_lines=True)
            st.caption(f"value {json.dumps(call['value'], default=str)} · tokens {call['tokens_in']}/{call['tokens_out']} · "
                       f"attempts {call['attempts']}")


def show(run: dict[str, Any], tick: int, *, title: Optional[str] = None, prompts_on_demand: bool = False) -> None:
    """The tick opened: a heading and its metrics, then what was said and the decisions beside the prompts (with
    `prompts_on_demand`, behind a toggle: a page that always opens a tick, Replay, draws them only when asked)."""
    unit = noun(run["scenario"])
    st.subheader(title or f"{unit.capitalize()} {tick} of run {run['run_id']}")
    record = eq("tick_record", run, run["run_id"], int(tick))
    if record:
        numbers = {k: v for k, v in record["metrics"].items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        if numbers:
            st.caption(" · ".join(f"{k} {v:.4g}" for k, v in list(numbers.items())[:8]))
    left, right = st.columns(2)
    with left:
        st.markdown("**What was said**")
        _said(run, tick)
        st.markdown("**Decisions**")
        _decisions(run, tick)
    with right:
        st.markdown("**Prompts and answers**")
        if not prompts_on_demand or st.toggle("Show the LLM's prompts and answers", key=f"{PROMPTS}-{run['run_id']}"):
            _prompts(run, tick)
