"""Conversations: what agents said to each other (talk messages, posts and comments, market
messages and proposals) as a thread per tick, with who said what to whom."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from app_pages.common import choose_run, page, q

SHOWN = 300


def _who(agent: object) -> str:
    return "everyone" if agent is None or pd.isna(agent) else f"agent {int(agent)}"


def _to(target: object, data: dict) -> str:
    """The addressee: the event's target, else a `to` list in its data (first three named), else everyone."""
    to = data.get("to") if isinstance(data, dict) else None
    if (target is None or pd.isna(target)) and to:
        names = [str(t) for t in (to if isinstance(to, list) else [to])]
        return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return _who(target)


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    st.title(f"Conversations in run {run['run_id']}")
    ticks = q("conversation_ticks", run, run["run_id"])
    if not ticks:
        st.info("No agent said anything in this run. (In the fishery, turn on `talk`.)")
        return
    lo, hi = (ticks[0], ticks[-1])
    if hi > lo:
        lo, hi = st.select_slider("Ticks", options=ticks, value=(ticks[0], ticks[min(len(ticks) - 1, 2)]))
    said = q("conversation", run, run["run_id"], (int(lo), int(hi)))
    if said.empty:
        st.info(f"Nothing said between ticks {lo} and {hi}.")
        return
    kinds = sorted(said["kind"].unique())
    chosen = st.multiselect("Kinds", kinds, default=kinds)
    agent = st.text_input("Only messages from or to agent (id)", "")
    said = said[said["kind"].isin(chosen)]
    if agent.strip().isdigit():
        a = int(agent)
        said = said[(said["actor"] == a) | (said["target"] == a)]
    st.caption(f"{len(said)} messages" + (f"; showing the first {SHOWN}" if len(said) > SHOWN else ""))
    for tick, part in said.head(SHOWN).groupby("tick", sort=True):
        st.subheader(f"Tick {tick}")
        for _, m in part.iterrows():
            with st.chat_message("user", avatar=":material/person:"):
                st.markdown(f"**{_who(m['actor'])} → {_to(m['target'], m['data'])}** · `{m['kind']}`")
                st.write(m["text"])
                extra = {k: v for k, v in m["data"].items() if k not in ("text", "content", "message", "body", "to")}
                if extra:
                    st.caption(json.dumps(extra, default=str)[:300])


page(render)
