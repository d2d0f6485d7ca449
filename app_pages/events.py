"""Event log: every event and every decision (agent step: action, payoff, fallback, reason) of a run in one table,
filtered by kind, agent, tick range and a text search, a page at a time; and Replay: what happened at the
shared replay cursor's tick (its metrics, events and decisions).

Filtering, counting and paging happen in SQL (sim.store.event_queries), so a run of a million agent steps shows at once.
The view (mode, kinds, agent, search, ticks, page) is in the URL.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import pandas as pd
import streamlit as st

from app_pages import charts, export
from app_pages.common import as_int, choose_run, eq, init_state, noun, page, set_url, tick_picker, url_list, url_value
from sim.store import event_queries as events

PAGE_SIZE = 200
MODES = ["Log", "Replay"]
SHOWN_METRICS = 8


def _highlight(row: pd.Series) -> list[str]:
    return ["background-color: #ffd7d7" if row.get("fallback") is True else "" for _ in row]


def _pager(total: int, key: str, url_key: Optional[str], signature: Any) -> int:
    """A page number (1-based) over `total` rows, back to 1 when `signature` (the filters) changes."""
    pages = max(1, math.ceil(total / PAGE_SIZE))
    if st.session_state.get(f"{key}_signature") not in (None, signature):
        st.session_state[key] = 1
    st.session_state[f"{key}_signature"] = signature
    init_state(key, (as_int(url_value(url_key)) if url_key else None) or 1)
    st.session_state[key] = max(1, min(pages, as_int(st.session_state[key]) or 1))
    number = 1
    if pages > 1:
        number = int(st.number_input(f"Page (of {pages}, {PAGE_SIZE} rows each)", min_value=1, max_value=pages, step=1,
                                     key=key))
    if url_key:
        set_url(url_key, number if number > 1 else None)
    return number


def _table(rows: pd.DataFrame, unit_of_time: str) -> None:
    shown = rows.drop(columns=["id"])
    header = {"tick": st.column_config.NumberColumn(unit_of_time)}
    if shown["fallback"].eq(True).any():
        st.dataframe(shown.style.apply(_highlight, axis=1), hide_index=True, width="stretch", column_config=header)
    else:
        st.dataframe(shown, hide_index=True, width="stretch", column_config=header)


def _rows(run: dict[str, Any], filters: dict[str, Any], counts: pd.DataFrame, key: str, url_key: Optional[str],
          what: str) -> None:
    """The caption with the counts, the page control and one page of the log."""
    n_events, n_decisions = int(counts["events"].sum()), int(counts["decisions"].sum())
    total = n_events + n_decisions
    if total == 0:
        st.info(f"No event or decision {what} matches these filters.")
        return
    number = _pager(total, key, url_key, tuple(sorted((k, str(v)) for k, v in filters.items())))
    offset = (number - 1) * PAGE_SIZE
    rows = eq("log_page", run, run["run_id"], offset=offset, limit=PAGE_SIZE, counts=counts, **filters)
    st.caption(f"{n_events} events and {n_decisions} decisions {what}; showing rows {offset + 1}–{offset + len(rows)} "
               f"of {total}" + (f" (page {number} of {math.ceil(total / PAGE_SIZE)})" if total > PAGE_SIZE else "") + ".")
    _table(rows, noun(run["scenario"]))


def _metrics(run: dict[str, Any], tick: int) -> None:
    record = eq("tick_record", run, run["run_id"], int(tick))
    if not record:
        st.caption(f"{noun(run['scenario']).capitalize()} {tick} has no stored metrics.")
        return
    numbers = {k: v for k, v in record["metrics"].items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    if numbers:
        cols = st.columns(min(4, len(numbers)))
        for i, (name, value) in enumerate(list(numbers.items())[:SHOWN_METRICS]):
            cols[i % len(cols)].metric(name, f"{value:.4g}")
    with st.expander(f"All metrics and the world state at {noun(run['scenario'])} {tick}"):
        st.dataframe(pd.DataFrame({"metric": list(record["metrics"]), "value": [str(v) for v in record["metrics"].values()]}),
                     hide_index=True, width="stretch")
        if record["state"]:
            st.json(record["state"], expanded=False)


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    rid = run["run_id"]
    st.title(f"Event log of run {rid}")
    kinds = eq("log_kinds", run, rid)
    if not kinds:
        st.info("This run has no events or decisions yet.")
        return
    init_state("log_mode", url_value("mode") if url_value("mode") in MODES else MODES[0])
    mode = st.radio("View", MODES, key="log_mode", horizontal=True,
                    help="Log: every event and decision; Replay: what happened at the replay cursor's tick")
    set_url("mode", mode if mode != MODES[0] else None)

    c = st.columns([3, 3, 2])
    init_state("log_q", url_value("q") or "")
    search = c[0].text_input("Search", key="log_q", placeholder="words, case-insensitive",
                             help="a case-insensitive substring of an event's data, or of a decision's action or reason")
    wanted = [k for k in url_list("kind") if k in kinds]
    init_state("log_kinds", wanted or list(kinds))
    st.session_state["log_kinds"] = [k for k in st.session_state["log_kinds"] if k in kinds]
    chosen = c[1].multiselect("Kinds", kinds, key="log_kinds", help=f"`{events.DECISION}`: the agents' decisions")
    init_state("log_agent", url_value("agent") or "")
    agent_text = c[2].text_input("Agent (id)", key="log_agent", placeholder="every agent",
                                 help="events it made or was the target of, and its decisions")
    agent = as_int(agent_text) if agent_text.strip() else None
    if agent_text.strip() and agent is None:
        st.warning(f"{agent_text!r} is not an agent id; showing every agent.")
    set_url("q", search.strip() or None)
    set_url("kind", None if set(chosen) == set(kinds) else chosen)
    set_url("agent", agent)
    if not chosen:
        st.info("Choose at least one kind.")
        return
    filters: dict[str, Any] = dict(kinds=None if set(chosen) == set(kinds) else tuple(chosen), agent=agent,
                                   search=search.strip() or None)

    if mode == "Replay":
        unit = noun(run["scenario"])
        tick = tick_picker(run, f"Replay {unit}")
        if tick is None:
            return
        st.subheader(f"{unit.capitalize()} {tick}")
        _metrics(run, tick)
        filters["ticks"] = (int(tick), int(tick))
        counts = eq("log_counts", run, rid, **filters)
        _rows(run, filters, counts, "log_replay_page", None, f"at {unit} {tick}")
        return

    last = max(1, int(run.get("ticks") or 1))
    counts_all = eq("log_counts", run, rid, **filters, ticks=None)
    lo = min(1, int(counts_all["tick"].min())) if not counts_all.empty else 1
    hi = max(last, int(counts_all["tick"].max())) if not counts_all.empty else last
    ticks: tuple[int, int] = (lo, hi)
    if hi > lo:
        from_url = [as_int(v) for v in (url_value("ticks") or "").split("-")]
        default = (lo, hi)
        if len(from_url) == 2 and None not in from_url:
            default = (max(lo, min(from_url)), min(hi, max(from_url)))
        init_state("log_ticks", default)
        a, b = st.session_state["log_ticks"]
        st.session_state["log_ticks"] = (max(lo, min(a, hi)), min(hi, max(b, lo)))
        ticks = tuple(int(t) for t in st.slider(f"{noun(run['scenario'])}s".capitalize(), lo, hi, key="log_ticks"))
    set_url("ticks", None if ticks == (lo, hi) else f"{ticks[0]}-{ticks[1]}")
    counts = counts_all[(counts_all["tick"] >= ticks[0]) & (counts_all["tick"] <= ticks[1])].reset_index(drop=True)
    filters["ticks"] = None if ticks == (lo, hi) else ticks
    if len(counts) > 1:
        long = counts.melt(id_vars=["tick"], value_vars=["events", "decisions"], var_name="type", value_name="count")
        export.chart(charts.stacked_counts(long[long["count"] > 0], x="tick", color="type", noun=noun(run["scenario"]),
                                           counted="rows", title=f"Matching events and decisions per {noun(run['scenario'])}")
                     .properties(height=120), f"{rid}-log-counts", key="log-counts")
    _rows(run, filters, counts, "log_page", "p", "match")


page(render)
