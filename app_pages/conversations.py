"""Conversations: what agents said to each other (talk messages, posts and comments threaded under their post,
market messages, replies, proposals and payments), tick by tick, with who said what to whom.

Everything that matches the filters is shown, a page of messages at a time ("showing X-Y of Z"); the search,
kinds, agent, tick range and page are in the URL. What agents (or their LLMs) wrote is shown as plain text,
never as markdown.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import pandas as pd
import streamlit as st

from app_pages.common import as_int, choose_run, eq, init_state, noun, page, set_url, url_list, url_value
from app_pages.said import addressee, md_escape, structured_line, who
from sim.store import event_queries as events

PAGE_SIZE = 100
MAX_INDENT = 6


_HIDDEN = set(events.TEXT_KEYS) | {"to", "item", "parent", "depth", "business", "items", "total", "amount"}


def _meta(data: dict[str, Any]) -> str:
    """The event's other short scalar fields as `key value` pairs (escaped), e.g. `forum art · stance 0.29`."""
    parts = []
    for key, value in data.items():
        if key in _HIDDEN or isinstance(value, (dict, list)) or value is None:
            continue
        shown = f"{value:.3g}" if isinstance(value, float) else str(value)
        parts.append(f"{key} {shown[:60]}")
    return md_escape(" · ".join(parts[:6]))


def _message(m: pd.Series, items: dict[int, dict[str, Any]]) -> None:
    """One message: who to whom and its kind, then what was said as plain text."""
    data = m["data"] if isinstance(m["data"], dict) else {}
    with st.chat_message("user", avatar=":material/person:"):
        st.markdown(f"**{who(m['actor'])} → {md_escape(addressee(m['target'], data))}** · `{md_escape(m['kind'])}`")
        parent = as_int(data.get("parent"))
        if m["kind"] == "comment" and parent is not None and parent in items and items[parent]["kind"] == "comment":
            p = items[parent]
            st.caption(f"replying to {who(p['actor'])}'s comment (tick {p['tick']}):")
            st.text(f"> {p['text'] or ''}")
        line = structured_line(m["kind"], m["actor"], m["target"], data)
        if line is not None:
            st.text(line)
        elif m["text"] is not None:
            st.text(m["text"])
        meta = _meta(data)
        if meta:
            st.caption(meta)


def _thread_head(post: Optional[dict[str, Any]], root: int) -> None:
    """The post a group of comments answers: its author, tick and text."""
    if post is None:
        st.caption(f"on post #{root} (not stored)")
        return
    with st.container(border=True):
        st.caption(f"Thread: {who(post['actor'])}'s {post['kind']} #{root} (tick {post['tick']})")
        st.text(post["text"] or "")


def _tick(part: pd.DataFrame, items: dict[int, dict[str, Any]]) -> None:
    """A tick's messages in order; comments grouped under the post they answer, indented by depth."""
    threads: dict[int, list[pd.Series]] = {}
    order: list[tuple[str, Any]] = []
    for _, m in part.iterrows():
        data = m["data"] if isinstance(m["data"], dict) else {}
        if m["kind"] == "comment" and as_int(data.get("parent")) is not None:
            root = events.thread_root(items, int(data["parent"]))
            if root not in threads:
                threads[root] = []
                order.append(("thread", root))
            threads[root].append(m)
        else:
            order.append(("message", m))
    for what, value in order:
        if what == "message":
            _message(value, items)
            continue
        _thread_head(items.get(value), value)
        for m in threads[value]:
            depth = max(1, min(MAX_INDENT, int(m["data"].get("depth") or 1)))
            _, body = st.columns([depth, 24 - depth])
            with body:
                _message(m, items)


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    rid = run["run_id"]
    st.title(f"Conversations in run {rid}")
    kinds = eq("said_kinds", run, rid)
    if not kinds:
        st.info("No agent said anything in this run. (In the fishery, turn on `talk`.)")
        return
    span = eq("conversation_span", run, rid, tuple(kinds))
    lo, hi = span if span else (1, max(1, int(run.get("ticks") or 1)))

    c = st.columns([3, 3, 2])
    init_state("conv_q", url_value("q") or "")
    search = c[0].text_input("Search what was said", key="conv_q", placeholder="words, case-insensitive",
                             help="a case-insensitive substring of the text (of a proposal or payment: its data)")
    wanted = [k for k in url_list("kind") if k in kinds]
    init_state("conv_kinds", wanted or list(kinds))
    st.session_state["conv_kinds"] = [k for k in st.session_state["conv_kinds"] if k in kinds]
    chosen = c[1].multiselect("Kinds", kinds, key="conv_kinds")
    init_state("conv_agent", url_value("agent") or "")
    agent_text = c[2].text_input("From or to agent (id)", key="conv_agent", placeholder="everyone")
    agent = as_int(agent_text) if agent_text.strip() else None
    if agent_text.strip() and agent is None:
        st.warning(f"{agent_text!r} is not an agent id; showing everyone.")
    ticks = (lo, hi)
    if hi > lo:
        from_url = [as_int(v) for v in (url_value("ticks") or "").split("-")]
        default = (lo, hi)
        if len(from_url) == 2 and None not in from_url:
            default = (max(lo, min(from_url)), min(hi, max(from_url)))
        init_state("conv_ticks", default)
        a, b = st.session_state["conv_ticks"]
        st.session_state["conv_ticks"] = (max(lo, min(a, hi)), min(hi, max(b, lo)))
        ticks = tuple(int(t) for t in st.slider(f"{noun(run['scenario'])}s".capitalize(), lo, hi, key="conv_ticks"))
    set_url("q", search.strip() or None)
    set_url("kind", None if set(chosen) == set(kinds) else chosen)
    set_url("agent", agent)
    set_url("ticks", None if ticks == (lo, hi) else f"{ticks[0]}-{ticks[1]}")
    if not chosen:
        st.info("Choose at least one kind.")
        return

    filters = dict(agent=agent, ticks=ticks, search=search.strip() or None)
    signature = (rid, tuple(chosen), agent, ticks, filters["search"])
    if st.session_state.get("conv_signature") not in (None, signature):
        st.session_state["conv_page"] = 1  # other filters: back to the first page
    st.session_state["conv_signature"] = signature
    _, total = eq("conversation_page", run, rid, tuple(chosen), offset=0, limit=0, **filters)
    if total == 0:
        st.info("Nothing said matches these filters.")
        return
    pages = max(1, math.ceil(total / PAGE_SIZE))
    init_state("conv_page", as_int(url_value("p")) or 1)
    st.session_state["conv_page"] = max(1, min(pages, as_int(st.session_state["conv_page"]) or 1))
    number = 1
    if pages > 1:
        number = int(st.number_input(f"Page (of {pages}, {PAGE_SIZE} messages each)", min_value=1, max_value=pages,
                                     step=1, key="conv_page"))
    set_url("p", number if number > 1 else None)
    offset = (number - 1) * PAGE_SIZE
    said, total = eq("conversation_page", run, rid, tuple(chosen), offset=offset, limit=PAGE_SIZE, **filters)
    st.caption(f"Showing messages {offset + 1}–{offset + len(said)} of {total}"
               + (f" (page {number} of {pages})" if pages > 1 else "")
               + f", {noun(run['scenario'])}s {int(said['tick'].min())}–{int(said['tick'].max())}.")
    parents = [as_int(d.get("parent")) for d in said["data"] if isinstance(d, dict)]
    items = eq("thread_items", run, rid, tuple(sorted({p for p in parents if p is not None})),
               up_to_tick=int(said["tick"].max())) if any(p is not None for p in parents) else {}
    for tick, part in said.groupby("tick", sort=True):
        st.subheader(f"{noun(run['scenario']).capitalize()} {tick}")
        _tick(part, items)
    if pages > 1:
        st.caption(f"Page {number} of {pages}: change the page above to see the rest.")


page(render)
