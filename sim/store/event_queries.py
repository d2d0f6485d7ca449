"""Read-only queries for the Conversations and Event log pages: filtered, counted and paged in SQL.

Filters (kinds, agent, tick range, text search) become WHERE clauses and pages are LIMIT/OFFSET,
so a run of 10,000 agents x 100 ticks (a million agent steps, hundreds of thousands of events)
is never loaded whole. Text search is a case-insensitive LIKE: on what was said (the text keys
of an event's data) for conversations, on the whole data / action JSON and the reason for the log.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Optional

import pandas as pd
from sqlalchemy import String, and_, cast, func, or_, select, type_coerce
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import ColumnElement

from sim.store.queries import EVENTS, STEPS, TEXT_KEYS, TICKS, json_value

#: event kinds that are said without a text: the market's structured offers and payments
STRUCTURED_KINDS = ("proposal", "payment")
#: the Event log's pseudo-kind for an agent step (a decision), beside the event kinds
DECISION = "decision"
#: social events that form threads (a comment's `parent` is the item id of a post or comment)
THREAD_KINDS = ("post", "comment")
CONVERSATION_COLUMNS = ["id", "tick", "kind", "actor", "target", "text", "data"]
LOG_COLUMNS = ["tick", "type", "kind", "agent", "target", "detail", "payoff", "reward", "fallback", "reason", "id"]
_ESCAPE = "\\"


# ----- building blocks -------------------------------------------------------------------------------------------
def like_pattern(term: str, *, as_json: bool = False) -> str:
    """`%term%` for a case-insensitive LIKE (lower-cased, `%`, `_` and `\\` escaped); with `as_json`, the term as it
    appears inside a stored JSON string (quotes, newlines and non-ASCII characters escaped as the store writes them)."""
    needle = term.strip().lower()
    if as_json:
        needle = json.dumps(needle)[1:-1]
    needle = needle.replace(_ESCAPE, _ESCAPE * 2).replace("%", _ESCAPE + "%").replace("_", _ESCAPE + "_")
    return f"%{needle}%"


def _contains(column: Any, term: str, dialect: str, *, as_json: bool = False, raw: bool = False) -> ColumnElement:
    """`column` (as text; `raw`: a JSON column, whole) contains `term`, ignoring case: SQLite's LIKE already ignores
    ASCII case (and reads a JSON column as the text it stores), elsewhere ILIKE on the column cast to text."""
    pattern = like_pattern(term, as_json=as_json)
    if dialect == "sqlite":
        return (type_coerce(column, String) if raw else column).like(pattern, escape=_ESCAPE)
    return (cast(column, String) if raw else column).ilike(pattern, escape=_ESCAPE)


def _text_of(data: Any) -> Optional[str]:
    """What an event's data says: its first non-empty text key, or None."""
    if not isinstance(data, dict):
        return None
    return next((str(data[k]) for k in TEXT_KEYS if data.get(k) not in (None, "")), None)


def _has_text() -> ColumnElement:
    return or_(*(EVENTS.c.data[k].as_string().is_not(None) for k in TEXT_KEYS))


def _said_text_contains(term: str, dialect: str) -> ColumnElement:
    """An event whose text keys contain `term`, or a structured (market) event whose data does."""
    e = EVENTS.c
    return or_(*(_contains(e.data[k].as_string(), term, dialect) for k in TEXT_KEYS),
               and_(e.kind.in_(STRUCTURED_KINDS), _contains(e.data, term, dialect, as_json=True, raw=True)))


def _event_where(run_id: str, *, kinds: Optional[Iterable[str]], agent: Optional[int], ticks: Optional[tuple[int, int]],
                 search: Optional[str], said: bool, dialect: str) -> list[ColumnElement]:
    e = EVENTS.c
    cond: list[ColumnElement] = [e.run_id == run_id]
    if kinds is not None:
        cond.append(e.kind.in_(list(kinds)))
    if ticks is not None:
        cond += [e.tick >= int(ticks[0]), e.tick <= int(ticks[1])]
    if agent is not None:
        cond.append(or_(e.actor == int(agent), e.target == int(agent)))
    if search and search.strip():
        cond.append(_said_text_contains(search, dialect) if said
                    else _contains(e.data, search, dialect, as_json=True, raw=True))
    return cond


def _step_where(run_id: str, *, agent: Optional[int], ticks: Optional[tuple[int, int]],
                search: Optional[str], dialect: str) -> list[ColumnElement]:
    s = STEPS.c
    cond: list[ColumnElement] = [s.run_id == run_id]
    if ticks is not None:
        cond += [s.tick >= int(ticks[0]), s.tick <= int(ticks[1])]
    if agent is not None:
        cond.append(s.agent_id == int(agent))
    if search and search.strip():
        cond.append(or_(_contains(s.action, search, dialect, as_json=True, raw=True), _contains(s.reason, search, dialect)))
    return cond


# ----- conversations ---------------------------------------------------------------------------------------------
def said_kinds(engine: Engine, run_id: str) -> list[str]:
    """The run's event kinds that are conversation: non-norm kinds whose events carry text, and the market's
    proposals and payments (checked per kind with one indexed probe each)."""
    e = EVENTS.c
    with engine.connect() as conn:
        kinds = [r[0] for r in conn.execute(select(e.kind).where(e.run_id == run_id).group_by(e.kind).order_by(e.kind))]
        out = []
        for kind in kinds:
            if kind.startswith("norm."):
                continue
            if kind in STRUCTURED_KINDS or conn.execute(
                    select(e.id).where(e.run_id == run_id, e.kind == kind, _has_text()).limit(1)).first() is not None:
                out.append(kind)
    return out


def conversation_span(engine: Engine, run_id: str, kinds: Sequence[str]) -> Optional[tuple[int, int]]:
    """First and last tick with an event of these kinds, or None when there is none."""
    e = EVENTS.c
    if not kinds:
        return None
    with engine.connect() as conn:
        lo, hi = conn.execute(select(func.min(e.tick), func.max(e.tick)).where(e.run_id == run_id, e.kind.in_(list(kinds)))).one()
    return None if lo is None else (int(lo), int(hi))


def conversation_page(engine: Engine, run_id: str, kinds: Sequence[str], *, agent: Optional[int] = None,
                      ticks: Optional[tuple[int, int]] = None, search: Optional[str] = None, offset: int = 0,
                      limit: int = 100) -> tuple[pd.DataFrame, int]:
    """One page of what was said (events of `kinds`, in tick order) and how many match in all.

    `agent` keeps what it said or was told; `search` keeps events whose text (or, for proposals and payments,
    data) contains it, case-insensitively. Columns: id, tick, kind, actor, target, text (None for structured
    events), data (a dict)."""
    e = EVENTS.c
    if not kinds:
        return pd.DataFrame(columns=CONVERSATION_COLUMNS), 0
    cond = _event_where(run_id, kinds=kinds, agent=agent, ticks=ticks, search=search, said=True,
                         dialect=engine.dialect.name)
    with engine.connect() as conn:
        total = int(conn.execute(select(func.count()).select_from(EVENTS).where(and_(*cond))).scalar() or 0)
        rows = [] if limit <= 0 else [dict(r) for r in conn.execute(
            select(e.id, e.tick, e.kind, e.actor, e.target, e.data).where(and_(*cond))
            .order_by(e.tick, e.id).limit(int(limit)).offset(int(offset))).mappings().all()]
    for r in rows:
        r["data"] = json_value(r["data"]) or {}
        r["text"] = _text_of(r["data"])
    return pd.DataFrame(rows, columns=CONVERSATION_COLUMNS), total


def thread_items(engine: Engine, run_id: str, item_ids: Iterable[int], up_to_tick: Optional[int] = None,
                 max_depth: int = 50) -> dict[int, dict[str, Any]]:
    """Posts and comments of a social run by item id, with all their ancestors (a comment's parent chain up to
    its post): item -> {item, parent (None for a post), kind, actor, tick, depth, text}. `up_to_tick` (the last
    tick of the comments asking: a parent is never newer) bounds the scan."""
    e = EVENTS.c
    found: dict[int, dict[str, Any]] = {}
    wanted = {int(i) for i in item_ids if i is not None}
    with engine.connect() as conn:
        for _ in range(max_depth):
            wanted -= set(found)
            if not wanted:
                break
            rows = []
            ids = sorted(wanted)
            for start in range(0, len(ids), 500):
                q = select(e.tick, e.kind, e.actor, e.data).where(
                    e.run_id == run_id, e.kind.in_(THREAD_KINDS), e.data["item"].as_integer().in_(ids[start:start + 500]))
                rows += conn.execute(q if up_to_tick is None else q.where(e.tick <= int(up_to_tick))).all()
            parents: set[int] = set()
            for tick, kind, actor, data in rows:
                data = json_value(data) or {}
                item = int(data["item"])
                parent = data.get("parent")
                parent = None if parent is None or int(parent) < 0 else int(parent)
                found[item] = {"item": item, "parent": parent, "kind": kind, "actor": actor, "tick": int(tick),
                               "depth": int(data.get("depth") or 0), "text": _text_of(data)}
                if parent is not None:
                    parents.add(parent)
            wanted |= parents - set(found)
            if not rows:
                break
    return found


def thread_root(items: dict[int, dict[str, Any]], item: int) -> int:
    """The post an item belongs to (the top of its parent chain as far as `items` knows it)."""
    seen = set()
    while item in items and items[item]["parent"] is not None and item not in seen:
        seen.add(item)
        item = items[item]["parent"]
    return item


# ----- the event log: events and decisions ---------------------------------------------------------------------------
def log_kinds(engine: Engine, run_id: str) -> list[str]:
    """The run's event kinds, then `decision` when it has agent steps."""
    e, s = EVENTS.c, STEPS.c
    with engine.connect() as conn:
        kinds = [r[0] for r in conn.execute(select(e.kind).where(e.run_id == run_id).group_by(e.kind).order_by(e.kind))]
        has_steps = conn.execute(select(s.id).where(s.run_id == run_id).limit(1)).first() is not None
    return kinds + ([DECISION] if has_steps else [])


def log_counts(engine: Engine, run_id: str, *, kinds: Optional[Sequence[str]] = None, agent: Optional[int] = None,
               ticks: Optional[tuple[int, int]] = None, search: Optional[str] = None) -> pd.DataFrame:
    """Per tick, how many events and decisions match the filters (tick, events, decisions), counted in SQL.

    `kinds` None keeps every kind and the decisions; else the event kinds listed, and decisions only if
    `decision` is among them."""
    e, s = EVENTS.c, STEPS.c
    event_kinds = None if kinds is None else [k for k in kinds if k != DECISION]
    with_steps = kinds is None or DECISION in kinds
    per_tick: dict[int, list[int]] = {}
    with engine.connect() as conn:
        if event_kinds is None or event_kinds:
            cond = _event_where(run_id, kinds=event_kinds, agent=agent, ticks=ticks, search=search, said=False,
                                dialect=engine.dialect.name)
            for tick, n in conn.execute(select(e.tick, func.count()).where(and_(*cond)).group_by(e.tick)):
                per_tick.setdefault(int(tick), [0, 0])[0] = int(n)
        if with_steps:
            cond = _step_where(run_id, agent=agent, ticks=ticks, search=search, dialect=engine.dialect.name)
            for tick, n in conn.execute(select(s.tick, func.count()).where(and_(*cond)).group_by(s.tick)):
                per_tick.setdefault(int(tick), [0, 0])[1] = int(n)
    return pd.DataFrame([(t, *per_tick[t]) for t in sorted(per_tick)], columns=["tick", "events", "decisions"])


def _window(counts: pd.DataFrame, offset: int, limit: int) -> Optional[tuple[int, int, int, int, int, int]]:
    """Where rows [offset, offset+limit) of the log (per tick: its events, then its decisions) lie:
    (first tick, last tick, events to skip from the first tick on, events to take, decisions to skip, to take).
    The window's events (and its decisions) are contiguous in their own (tick, id) order, so two queries over
    the window's ticks with LIMIT/OFFSET fetch them."""
    table = [(int(t), int(e), int(d)) for t, e, d in counts[["tick", "events", "decisions"]].itertuples(index=False)]
    pos, start = 0, None
    for i, (_, n_e, n_d) in enumerate(table):
        if pos + n_e + n_d > offset:
            start = i
            break
        pos += n_e + n_d
    if start is None or limit <= 0:
        return None
    first, first_events = table[start][0], table[start][1]
    k = offset - pos  # rows of the first tick before the window
    e_skip, d_skip = min(k, first_events), max(0, k - first_events)
    e_take = d_take = 0
    remaining, last = limit, first
    for tick, n_e, n_d in table[start:]:
        skip = k if tick == first else 0
        take = min(max(0, n_e - skip), remaining)
        e_take, remaining = e_take + take, remaining - take
        take = min(n_d - max(0, skip - n_e), remaining)
        d_take, remaining = d_take + take, remaining - take
        last = tick
        if remaining <= 0:
            break
    return first, last, e_skip, e_take, d_skip, d_take


def _compact(value: Any, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _event_detail(kind: str, data: dict[str, Any]) -> str:
    """An event's data in a line: its text when it has one (with the other keys after it), else the data."""
    text = _text_of(data)
    if text is None:
        return _compact(data)
    rest = {k: v for k, v in data.items() if k not in TEXT_KEYS}
    return _compact(text) + (f"  ·  {_compact(rest, 160)}" if rest else "")


def log_page(engine: Engine, run_id: str, *, kinds: Optional[Sequence[str]] = None, agent: Optional[int] = None,
             ticks: Optional[tuple[int, int]] = None, search: Optional[str] = None, offset: int = 0, limit: int = 200,
             counts: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """Rows [offset, offset+limit) of the run's log: per tick its events (by id), then its decisions (by agent),
    with the filters of `log_counts` (whose frame may be passed in to save a query). Each query reads only the
    ticks of the page, with LIMIT/OFFSET inside them. Columns: tick, type (event/decision), kind, agent (actor),
    target, detail (the event's text or data, the decision's action), payoff, reward, fallback, reason, id."""
    if counts is None:
        counts = log_counts(engine, run_id, kinds=kinds, agent=agent, ticks=ticks, search=search)
    where = _window(counts, int(offset), int(limit)) if not counts.empty else None
    if where is None:
        return pd.DataFrame(columns=LOG_COLUMNS)
    first, last, e_skip, e_take, d_skip, d_take = where
    e, s = EVENTS.c, STEPS.c
    span = (first, last) if ticks is None else (max(first, int(ticks[0])), min(last, int(ticks[1])))
    rows: list[dict[str, Any]] = []
    with engine.connect() as conn:
        if e_take:
            event_kinds = None if kinds is None else [k for k in kinds if k != DECISION]
            cond = _event_where(run_id, kinds=event_kinds, agent=agent, ticks=span, search=search, said=False,
                                dialect=engine.dialect.name)
            for r in conn.execute(select(e.id, e.tick, e.kind, e.actor, e.target, e.data).where(and_(*cond))
                                  .order_by(e.tick, e.id).limit(e_take).offset(e_skip)).mappings():
                data = json_value(r["data"]) or {}
                rows.append({"tick": r["tick"], "type": "event", "kind": r["kind"], "agent": r["actor"], "target": r["target"],
                             "detail": _event_detail(r["kind"], data), "payoff": None, "reward": None, "fallback": None,
                             "reason": None, "id": r["id"], "_order": 0})
        if d_take:
            cond = _step_where(run_id, agent=agent, ticks=span, search=search, dialect=engine.dialect.name)
            for r in conn.execute(select(s.id, s.tick, s.agent_id, s.backend, s.action, s.payoff, s.reward, s.fallback,
                                         s.reason).where(and_(*cond))
                                  .order_by(s.tick, s.agent_id, s.id).limit(d_take).offset(d_skip)).mappings():
                rows.append({"tick": r["tick"], "type": DECISION, "kind": r["backend"], "agent": r["agent_id"],
                             "target": None, "detail": _compact(json_value(r["action"]) or {}), "payoff": r["payoff"],
                             "reward": r["reward"], "fallback": bool(r["fallback"]), "reason": r["reason"], "id": r["id"],
                             "_order": 1})
    rows.sort(key=lambda r: (r["tick"], r["_order"]))  # stable: each part is already in its order
    df = pd.DataFrame(rows, columns=[*LOG_COLUMNS, "_order"]).drop(columns="_order")
    for col in ("agent", "target"):
        df[col] = df[col].astype("Int64")
    return df


def tick_record(engine: Engine, run_id: str, tick: int) -> dict[str, Any]:
    """One committed tick: its metrics (a dict), its world state (a dict) and how long it took; {} if none."""
    t = TICKS.c
    with engine.connect() as conn:
        r = conn.execute(select(t.metrics, t.state, t.duration_s).where(t.run_id == run_id, t.tick == int(tick))).first()
    if r is None:
        return {}
    return {"metrics": json_value(r[0]) or {}, "state": json_value(r[1]) or {}, "duration_s": r[2]}
