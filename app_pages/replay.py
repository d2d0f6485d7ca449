"""Replay: a run as a timeline (AgentSociety's replay): what happened at each tick, by kind, with the replay cursor
on it (a click on the timeline moves the cursor; step back and forward, or play); for the grid games the board itself
at the cursor (agents, apples, the river's waste, beams) with a slider of its own and an animation of the steps; and
the cursor's tick opened: what was said, each decision, the prompts."""

from __future__ import annotations

import time

import altair as alt
import pandas as pd
import streamlit as st

from app_pages import charts, export, grid_view, tick_view
from app_pages.common import choose_run, noun, page, q, scenario_class, tick_picker
from scenarios.grid import frames as grid_frames

#: steps of a grid game drawn at once around the cursor (the slider's and the animation's)
WINDOW = 100
PICK = "pick"
#: runs up to this many ticks get a bar a tick on the timeline (longer ones a linear axis)
ORDINAL_TICKS = 200
#: how long Play shows each tick
PLAY_SECONDS = 1.0


def _move(delta: int, last: int) -> None:
    """Step the replay cursor by `delta` ticks (kept in 1..last)."""
    tick = min(max(1, int(st.session_state.get("cursor_tick") or last) + delta), last)
    st.session_state["cursor_tick"] = tick
    st.session_state["cursor_slider"] = tick


def _clicked() -> None:
    point = tick_view.selected_tick(st.session_state.get("chart-replay-timeline"), PICK)
    if point is not None:
        st.session_state["cursor_tick"] = st.session_state["cursor_slider"] = int(point["tick"])


def timeline(kinds: pd.DataFrame, last: int, cursor: int, noun_: str) -> alt.LayerChart:
    """Events per tick, stacked by kind, every tick of the run on the axis, the cursor as a rule; a click picks a tick."""
    order = sorted(kinds["kind"].unique()) if len(kinds) else []
    pick = alt.selection_point(name=PICK, fields=["tick"], on="click", nearest=False)
    if last <= ORDINAL_TICKS:  # a band a tick (empty ticks keep their place)
        x = alt.X("tick:O", title=noun_, scale=alt.Scale(domain=list(range(1, last + 1))),
                  axis=alt.Axis(labelOverlap=True, labelAngle=0))
    else:
        x = alt.X("tick:Q", title=noun_, scale=alt.Scale(domain=[0.5, last + 0.5], nice=False),
                  axis=alt.Axis(format="d", tickMinStep=1))
    bars = alt.Chart(kinds, title=f"What happened each {noun_}").mark_bar(cursor="pointer").encode(
        x=x,
        y=alt.Y("count:Q", title="events", stack="zero", axis=alt.Axis(format="d", tickMinStep=1)),
        tooltip=[alt.Tooltip("tick:Q", title=noun_), "kind:N", "count:Q"],
        **charts.series_colour("kind", order, title="kind", symbol="square")).add_params(pick)
    rule = alt.Chart(pd.DataFrame({"tick": [cursor], "label": [f"cursor: {noun_} {cursor}"]})).mark_rule(
        color="#c44", strokeWidth=2).encode(x=alt.X("tick:O" if last <= ORDINAL_TICKS else "tick:Q"), tooltip=["label:N"])
    return alt.layer(bars, rule).properties(height=180)


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    rid = run["run_id"]
    unit = noun(run["scenario"])
    st.title(f"Replay of run {rid}")
    last = int(run.get("ticks") or 0)
    if last < 1:
        st.info("This run has no committed tick yet.")
        return
    kinds = q("event_timeline", run, rid)
    kinds = kinds[~kinds["kind"].str.startswith("policy.")] if len(kinds) else kinds
    c1, c2, c3, c4 = st.columns([1, 1, 1, 6], vertical_alignment="bottom")
    c1.button("◀", key="replay-back", on_click=_move, args=(-1, last), help=f"one {unit} back", width="stretch")
    c2.button("▶", key="replay-forward", on_click=_move, args=(1, last), help=f"one {unit} on", width="stretch")
    playing = c3.toggle("Play", key="replay-play", help=f"move on one {unit} every {PLAY_SECONDS:g} s to the end")
    with c4:
        cursor = tick_picker(run, f"Replay {unit}") or last
    if len(kinds):
        export.chart(timeline(kinds, last, cursor, unit), f"{rid}-timeline", key="replay-timeline", on_select=_clicked)
        st.caption(f"Click a {unit} on the timeline to move the cursor there.")
    else:
        st.caption("This run stored no events: its decisions and metrics are below.")
    if getattr(scenario_class(run["scenario"]), "maps", None):  # (a grid game: its board can be drawn)
        _grid(run, cursor, last, unit)
    with st.container(border=True):
        tick_view.show(run, cursor, prompts_on_demand=True)  # (the prompts on demand: see `tick_view.show`)
    if playing and cursor < last:  # play: the next tick in a moment (the whole page follows the cursor)
        time.sleep(PLAY_SECONDS)
        _move(1, last)
        st.rerun()


def _grid(run: dict, cursor: int, last: int, unit: str) -> None:
    """The grid game's board at the cursor, a slider over the steps around it, and their animation."""
    cls = scenario_class(run["scenario"])
    detail = q("get_run", run, run["run_id"]) or {}
    try:
        b = grid_frames.board(detail.get("config") or {}, getattr(cls, "maps", {}) or {})
    except Exception as exc:  # noqa: BLE001 - a map this install cannot read: said, not raised
        st.warning(f"The run's map cannot be drawn: {exc}")
        return
    first, end = max(1, cursor - WINDOW // 2), min(last, max(1, cursor - WINDOW // 2) + WINDOW - 1)
    states = q("states", run, run["run_id"], first, end)
    if not states:
        return
    cells, agents = grid_frames.frames(b, states)
    st.subheader(f"The board, {unit}s {first}-{end}")
    if not grid_frames.has_waste_and_beams(next(iter(states.values()))):
        st.caption("This run was stored before the grid games kept the river's waste and the beams (decision contract "
                   "8): only agents and apples are drawn.")
    left, right = st.columns([3, 2])
    with left:
        ids = sorted(int(a) for a in q("run_agents", run, run["run_id"])["agent_id"])
        export.chart(grid_view.board_chart(b, cells, agents, grid_frames.walls(b), start=cursor, noun=unit, ids=ids,
                                           title=f"Run {run['run_id']}: the board (drag the slider under it)"),
                     f"{run['run_id']}-board-{cursor}", key="replay-board", stretch=False)
    with right:
        ticks = sorted(states)
        river = "river" in grid_view.layers_of(b)  # (Gathering has none: its caption says nothing of one)
        st.image(_animation(run, b, first, end, cells, agents, ticks), caption=f"{unit}s {first}-{end}, 4 a second: agents "
                 "(a colour each, a white dot on the side they face, grey when tagged out), apples green, "
                 + ("the river blue and its waste brown, tagging beams yellow, cleaning beams cyan" if river
                    else "tagging beams yellow"))


def _animation(run: dict, b: grid_frames.Board, first: int, end: int, cells: pd.DataFrame, agents: pd.DataFrame,
               ticks: list[int]) -> bytes:
    key = ("replay-gif", run["run_id"], int(run.get("ticks") or 0), first, end)
    cache = st.session_state.setdefault("replay_gifs", {})
    if key not in cache:
        cache.clear()  # (one animation kept a session)
        cache[key] = grid_view.animation(b, cells, agents, ticks)
    return cache[key]


page(render)
