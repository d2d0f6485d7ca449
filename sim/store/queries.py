"""Read-only queries of the run store for the app (and `analysis`): small DataFrames, aggregated in SQL.

Every function takes an engine from `open_reader` (which never creates a database file)
and returns plain data or a pandas DataFrame. Queries over `agent_steps` and `events`
aggregate or filter in the database, so a run of 10,000 agents x 100 ticks never loads
whole tables into memory.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Optional

import pandas as pd
from sqlalchemy import Integer, MetaData, String, Table, and_, case, cast, create_engine, func, inspect, literal, select
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError

from sim.core.errors import UsageError
from sim.store.tables import AgentStep, EventRow, LLMCall, Run, RunAgent, Tick
from sim.store.usage import llm_usage  # noqa: F401 (a query of the app's `q`, defined without pandas for the store)

RUNS, TICKS, STEPS, EVENTS, CALLS, AGENTS = (m.__table__ for m in (Run, Tick, AgentStep, EventRow, LLMCall, RunAgent))
#: optional columns of `runs` that later versions of the store add (sweeps, forks)
OPTIONAL_RUN_COLUMNS = ("sweep_id", "parent_id", "branch_tick")
#: keys of an event's data that hold what was said
TEXT_KEYS = ("text", "content", "message", "body", "title", "comment")
#: keys of an agent's action or event data that hold its opinion (colours the network)
OPINION_KEYS = ("opinion", "stance")


def open_reader(url: str) -> Optional[Engine]:
    """An engine for reading `url`, or None when it names a SQLite file that does not exist.

    Nothing is created or migrated: opening a store to look at it must not write one.
    A URL that cannot be parsed or whose driver is missing raises a UsageError.
    """
    try:
        parsed = make_url(url)
        if parsed.get_backend_name() == "sqlite":
            db = parsed.database or ""
            if db in ("", ":memory:") or not Path(db).is_file():
                return None
            return create_engine(url, connect_args={"check_same_thread": False, "timeout": 30})
        return create_engine(url)
    except (ArgumentError, NoSuchModuleError, ImportError, ValueError) as exc:
        raise UsageError(f"cannot open database {url!r}: {str(exc).splitlines()[0]}") from None


def has_schema(engine: Engine) -> bool:
    """Whether the store's tables exist (an empty or foreign database has none)."""
    return inspect(engine).has_table("runs")


def _runs_table(engine: Engine) -> Table:
    """`runs` as it is in the database, so optional columns (sweep_id, parent_id) are seen when present."""
    return Table("runs", MetaData(), autoload_with=engine)


def json_value(value: Any) -> Any:
    """A JSON column's value as Python data (drivers that hand back text are decoded; NULL is {})."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value if value is not None else {}


def _light(table: Table) -> list[Any]:
    """The columns of `runs` but the initial state (a seeded graph can be megabytes: read only where it is drawn)."""
    return [c for c in table.c if c.name != "initial"]


def _to_dt(value: Any) -> Any:
    return pd.to_datetime(value, utc=True, errors="coerce") if value is not None else None


# ----- runs ------------------------------------------------------------------------------------
def list_runs(engine: Engine) -> pd.DataFrame:
    """One row per run: id, scenario, status, seed, policy, backend, ticks, horizon, times,
    the config, final metrics (dict and one `m.NAME` column each), and sweep/fork columns when stored."""
    table = _runs_table(engine)
    with engine.connect() as conn:
        rows = conn.execute(select(*_light(table)).order_by(table.c.created_at.desc())).mappings().all()
    out = []
    for r in rows:
        spec = json_value(r["spec"]) or {}
        config = spec.get("config", {}) if isinstance(spec, dict) else {}
        final = json_value(r["final_metrics"]) or {}
        llm = spec.get("llm", {}) if isinstance(spec, dict) else {}
        backend = r["policy"] if r["policy"] != "llm" else f"llm:{llm.get('provider', 'local')}"
        if r["policy"] == "llm" and (llm.get("model") or llm.get("cls")):
            backend += f" {llm.get('model') or llm.get('cls')}"
        row = {
            "run_id": r["id"], "scenario": r["scenario"], "status": r["status"], "seed": r["seed"],
            "policy": r["policy"], "backend": backend, "ticks": r["ticks"], "reason": r["reason"],
            "created_at": _to_dt(r["created_at"]), "duration_s": r["duration_s"],
            "reward_mode": config.get("reward_mode"), "config": config, "final_metrics": final,
        }
        for col in OPTIONAL_RUN_COLUMNS:
            row[col] = r.get(col) if col in r else None
        row.update({f"m.{k}": v for k, v in final.items() if isinstance(v, (int, float)) or v is None})
        out.append(row)
    columns = ["run_id", "scenario", "status", "seed", "policy", "backend", "ticks", "reason", "created_at",
               "duration_s", "reward_mode", "config", "final_metrics", *OPTIONAL_RUN_COLUMNS]
    return pd.DataFrame(out, columns=columns if not out else None)


def stored_specs(engine: Engine) -> list[dict[str, Any]]:
    """Every run's spec (the app reads the code references its runs used)."""
    table = _runs_table(engine)
    with engine.connect() as conn:
        return [json_value(spec) or {} for spec in conn.execute(select(table.c.spec)).scalars()]


def get_run(engine: Engine, run_id: str) -> Optional[dict[str, Any]]:
    """A run as a dict (spec, config, final metrics, versions...), or None if there is none with this id."""
    table = _runs_table(engine)
    with engine.connect() as conn:
        r = conn.execute(select(*_light(table)).where(table.c.id == run_id)).mappings().first()
    if r is None:
        return None
    run = dict(r)
    for key in ("spec", "final_metrics", "versions"):
        run[key] = json_value(run.get(key)) or {}
    run["config"] = run["spec"].get("config", {}) if isinstance(run["spec"], dict) else {}
    return run


def progress(engine: Engine, run_id: str) -> Optional[dict[str, Any]]:
    """(status, ticks committed, reason) of a run: what a progress bar polls."""
    with engine.connect() as conn:
        r = conn.execute(select(RUNS.c.status, RUNS.c.ticks, RUNS.c.reason).where(RUNS.c.id == run_id)).first()
    return None if r is None else {"status": r[0], "ticks": r[1], "reason": r[2]}


def find_run_by_digest(engine: Engine, digest: str, since: Any) -> Optional[str]:
    """The newest run with this spec digest created at or after `since` (a launched run; a validity probe of the same
    spec is not one)."""
    with engine.connect() as conn:
        r = conn.execute(select(RUNS.c.id).where(RUNS.c.spec_digest == digest, RUNS.c.created_at >= since,
                                                 RUNS.c.origin != "probe")
                         .order_by(RUNS.c.created_at.desc())).first()
    return None if r is None else r[0]


# ----- ticks -----------------------------------------------------------------------------------
def _flat_numbers(prefix: str, data: Any, out: dict[str, Any]) -> None:
    """Numeric leaves of a small dict as `prefix.key.sub` columns (bools and lists skipped)."""
    if isinstance(data, dict):
        for k, v in data.items():
            _flat_numbers(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        out[prefix] = data


def tick_frame(engine: Engine, run_id: str, max_points: int = 2000) -> pd.DataFrame:
    """Per-tick metrics (their own names) and numeric state fields (`state.NAME`), one row per tick.

    Long runs are thinned in SQL to about `max_points` evenly spaced ticks (the last one kept).
    """
    with engine.connect() as conn:
        n, last = conn.execute(select(func.count(), func.max(TICKS.c.tick)).where(TICKS.c.run_id == run_id)).one()
        q = select(TICKS.c.tick, TICKS.c.metrics, TICKS.c.state, TICKS.c.duration_s).where(TICKS.c.run_id == run_id)
        if n and n > max_points:
            every = -(-n // max_points)
            q = q.where((TICKS.c.tick % every == 0) | (TICKS.c.tick == last))
        rows = conn.execute(q.order_by(TICKS.c.tick)).all()
    out = []
    for tick, metrics, state, duration in rows:
        row: dict[str, Any] = {"tick": tick, "tick_seconds": duration}
        for k, v in (json_value(metrics) or {}).items():
            row[k] = v if not isinstance(v, bool) else float(v)
        _flat_numbers("state", json_value(state) or {}, row)
        out.append(row)
    return pd.DataFrame(out)


def state_at(engine: Engine, run_id: str, tick: int) -> dict[str, Any]:
    """The stored world snapshot of one tick ({} if none)."""
    with engine.connect() as conn:
        r = conn.execute(select(TICKS.c.state).where(TICKS.c.run_id == run_id, TICKS.c.tick == tick)).first()
    return (json_value(r[0]) or {}) if r else {}


# ----- agents ----------------------------------------------------------------------------------
def agent_tick_stats(engine: Engine, run_id: str) -> pd.DataFrame:
    """Per tick, over agents, computed in SQL: agents, mean/min/max payoff, mean reward, fallbacks."""
    s = STEPS.c
    q = (select(s.tick, func.count().label("agents"), func.avg(s.payoff).label("payoff_mean"),
                func.min(s.payoff).label("payoff_min"), func.max(s.payoff).label("payoff_max"),
                func.avg(s.reward).label("reward_mean"),
                func.sum(cast(s.fallback, Integer)).label("fallbacks"))
         .where(s.run_id == run_id).group_by(s.tick).order_by(s.tick))
    with engine.connect() as conn:
        return pd.DataFrame(conn.execute(q).mappings().all(),
                            columns=["tick", "agents", "payoff_mean", "payoff_min", "payoff_max", "reward_mean", "fallbacks"])


def payoffs_at(engine: Engine, run_id: str, tick: int) -> pd.DataFrame:
    """agent_id, payoff, reward, fallback of every agent at one tick."""
    s = STEPS.c
    q = select(s.agent_id, s.payoff, s.reward, s.fallback).where(s.run_id == run_id, s.tick == tick)
    with engine.connect() as conn:
        return pd.DataFrame(conn.execute(q).mappings().all(), columns=["agent_id", "payoff", "reward", "fallback"])


def _has_table(engine: Engine, name: str) -> bool:
    return inspect(engine).has_table(name)


def initial_state(engine: Engine, run_id: str) -> Optional[dict[str, Any]]:
    """What the run started from (`runs.initial`: e.g. the seeded follow graph); None for a run stored before
    the store kept it (and {} for a scenario that has nothing to add to its events)."""
    table = _runs_table(engine)
    if "initial" not in table.c:
        return None
    with engine.connect() as conn:
        value = conn.execute(select(table.c.initial).where(table.c.id == run_id)).scalar()
    return None if value is None else (json_value(value) or {})


def has_initial(engine: Engine, run_id: str) -> bool:
    """Whether the run stored what it starts from (runs made before the store kept it, and probes, did not), without
    reading it."""
    table = _runs_table(engine)
    if "initial" not in table.c:
        return False
    with engine.connect() as conn:
        head = conn.execute(select(func.substr(cast(table.c.initial, String), 1, 4)).where(table.c.id == run_id)).scalar()
    return head not in (None, "null")


def agent_count(engine: Engine, run_id: str) -> int:
    """How many agents took part: `run_agents`, else (older runs) those of the first tick (one indexed read)."""
    if _has_table(engine, "run_agents"):
        with engine.connect() as conn:
            n = conn.execute(select(func.count()).where(AGENTS.c.run_id == run_id)).scalar()
        if n:
            return int(n)
    s = STEPS.c
    with engine.connect() as conn:
        first = conn.execute(select(func.min(s.tick)).where(s.run_id == run_id)).scalar()
        if first is None:
            return 0
        return int(conn.execute(select(func.count()).where(s.run_id == run_id, s.tick == first)).scalar())


def run_agents(engine: Engine, run_id: str) -> pd.DataFrame:
    """Every agent that took part: agent_id, joined (tick; 0 = from the start), role, policy, strategy, persona,
    label (one line naming them) and the scenario's profile fields. For a run stored before `run_agents`, the
    distinct agents of its steps with what the steps say (backend as policy)."""
    cols = ["agent_id", "joined", "role", "policy", "strategy", "persona", "label"]
    rows: list[dict[str, Any]] = []
    if _has_table(engine, "run_agents"):
        a = AGENTS.c
        with engine.connect() as conn:
            for r in conn.execute(select(a.agent_id, a.joined, a.role, a.policy, a.strategy, a.persona, a.profile)
                                  .where(a.run_id == run_id).order_by(a.agent_id)).mappings():
                extra = json_value(r["profile"]) or {}
                rows.append({**{k: r[k] for k in cols[:6]}, **{k: v for k, v in extra.items() if k not in cols}})
    if not rows:
        s = STEPS.c
        with engine.connect() as conn:
            found = conn.execute(select(s.agent_id, func.min(s.tick), func.min(s.backend)).where(s.run_id == run_id)
                                 .group_by(s.agent_id).order_by(s.agent_id)).all()
        rows = [{"agent_id": aid, "joined": first, "role": "agent", "policy": backend, "strategy": None, "persona": ""}
                for aid, first, backend in found]
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=cols)
    df["label"] = [agent_label(r) for r in df.to_dict("records")]
    return df


def agent_roles(engine: Engine, run_id: str, agent_ids: Sequence[int]) -> pd.DataFrame:
    """agent_id, role and label of these agents (those a graph draws), from `run_agents`; empty for older runs."""
    ids = [int(a) for a in agent_ids]
    rows: list[dict[str, Any]] = []
    if ids and _has_table(engine, "run_agents"):
        a = AGENTS.c
        with engine.connect() as conn:
            for start in range(0, len(ids), 500):
                for r in conn.execute(select(a.agent_id, a.role, a.policy, a.strategy, a.persona, a.profile).where(
                        a.run_id == run_id, a.agent_id.in_(ids[start:start + 500]))).mappings():
                    row = {**dict(r), **(json_value(r["profile"]) or {})}
                    rows.append({"agent_id": r["agent_id"], "role": r["role"], "label": agent_label(row)})
    return pd.DataFrame(rows, columns=["agent_id", "role", "label"])


def agent_label(row: dict[str, Any]) -> str:
    """`agent 7 · business "Cafe Roma" · llm` / `agent 3 · fisher · greedy`: who an agent is, on one line."""
    parts = [f"agent {int(row['agent_id'])}"]
    role = row.get("role")
    name = row.get("name")
    parts.append(f"{role} {name}" if name and role else (role or ""))
    policy, strategy = row.get("policy"), row.get("strategy")
    parts.append(strategy if policy == "scripted" and strategy else (policy or ""))
    if row.get("generation") is not None and not pd.isna(row.get("generation")):
        parts.append(f"gen {int(row['generation'])}")
    persona = str(row.get("persona") or "")
    if persona:
        parts.append(persona if len(persona) <= 40 else persona[:39] + "…")
    return " · ".join(p for p in parts if p)


def agent_totals(engine: Engine, run_id: str) -> pd.DataFrame:
    """Per agent over the whole run, in SQL: ticks acted, total payoff and reward, fallbacks; norm violations,
    sanctions received and given (from the norm events)."""
    s, e = STEPS.c, EVENTS.c
    with engine.connect() as conn:
        steps = pd.DataFrame(conn.execute(
            select(s.agent_id, func.count().label("ticks"), func.sum(s.payoff).label("payoff"),
                   func.sum(s.reward).label("reward"), func.sum(cast(s.fallback, Integer)).label("fallbacks"))
            .where(s.run_id == run_id).group_by(s.agent_id)).mappings().all(),
            columns=["agent_id", "ticks", "payoff", "reward", "fallbacks"])
        counts = {}
        for kind, col, name in (("norm.violation", e.actor, "violations"), ("norm.sanction", e.target, "sanctions_received"),
                                ("norm.sanction", e.actor, "sanctions_given")):
            counts[name] = dict(conn.execute(select(col, func.count()).where(e.run_id == run_id, e.kind == kind,
                                                                              col.is_not(None)).group_by(col)).all())
    for name, by in counts.items():
        steps[name] = steps["agent_id"].map(by).fillna(0).astype(int)
    return steps


def agent_series(engine: Engine, run_id: str, agent_ids: Sequence[int], phase: Optional[str] = None) -> pd.DataFrame:
    """tick, agent_id, payoff and the numeric action of `phase` (or of the first numeric phase) of these agents:
    the per-agent comparison's lines."""
    s = STEPS.c
    ids = [int(a) for a in agent_ids]
    with engine.connect() as conn:
        rows = conn.execute(select(s.tick, s.agent_id, s.payoff, s.action).where(s.run_id == run_id, s.agent_id.in_(ids))
                            .order_by(s.tick, s.agent_id)).all()
    out = []
    for tick, aid, payoff, action in rows:
        act = json_value(action) or {}
        value = act.get(phase) if phase else next((v for v in act.values() if isinstance(v, (int, float))
                                                    and not isinstance(v, bool)), None)
        out.append({"tick": tick, "agent_id": aid, "payoff": payoff,
                    "action": float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None})
    return pd.DataFrame(out, columns=["tick", "agent_id", "payoff", "action"])


#: ticks whose usage limits go into one SQL CASE (two bound values each: far below SQLite's and PostgreSQL's limits)
TICKS_PER_CASE = 2000


def _action_value(phase: str) -> Any:
    """The number an agent step's action holds for `phase`, extracted in SQL (SQLite json_extract, PostgreSQL ->>)."""
    return STEPS.c.action[phase].as_float()


def action_stats(engine: Engine, run_id: str, phase: str) -> pd.DataFrame:
    """Per tick, in SQL: the mean and the largest numeric action of `phase` over the agents who took one."""
    s = STEPS.c
    value = _action_value(phase)
    q = (select(s.tick, func.avg(value).label(f"mean {phase}"), func.max(value).label(f"largest {phase}"))
         .where(s.run_id == run_id, value.is_not(None)).group_by(s.tick).order_by(s.tick))
    with engine.connect() as conn:
        return pd.DataFrame(conn.execute(q).all(), columns=["tick", f"mean {phase}", f"largest {phase}"])


def over_usage(engine: Engine, run_id: str, phase: str,
               limit: Callable[[dict[str, Any], int], Optional[float]]) -> pd.DataFrame:
    """Per agent: its decisions of `phase` and how many were above that tick's `limit(state, acting)` (the tick's
    stored state, and how many agents decided in that phase; None: no limit that tick). Counted in SQL: the ticks'
    limits go in as a CASE, one per `TICKS_PER_CASE` ticks. The scenario's rule is `analysis.usage.over_usage`'s."""
    s = STEPS.c
    value = _action_value(phase)
    with engine.connect() as conn:
        acting = dict(conn.execute(select(s.tick, func.count()).where(s.run_id == run_id, value.is_not(None))
                                   .group_by(s.tick)).all())
        states = {t: json_value(st) or {} for t, st in conn.execute(select(TICKS.c.tick, TICKS.c.state)
                                                                .where(TICKS.c.run_id == run_id))}
        limits = {t: limit(states.get(t, {}), n) for t, n in acting.items()}
        limits = {t: v + 1e-9 for t, v in limits.items() if v is not None}
        columns = ["agent_id", "over_usage", "usage_decisions"]
        if not acting:
            return pd.DataFrame(columns=columns)
        counts: dict[int, list[int]] = {}
        ticks = sorted(acting)
        for start in range(0, len(ticks), TICKS_PER_CASE):  # a CASE of at most TICKS_PER_CASE ticks (bind limits)
            part = ticks[start:start + TICKS_PER_CASE]
            lims = {t: limits[t] for t in part if t in limits}
            over = (func.sum(case((value > case({t: literal(v) for t, v in lims.items()}, value=s.tick,
                                                else_=literal(float("inf"))), 1), else_=0)) if lims else literal(0))
            q = select(s.agent_id, over, func.count()).where(s.run_id == run_id, value.is_not(None),
                                                             s.tick >= part[0], s.tick <= part[-1])
            for aid, n_over, n in conn.execute(q.group_by(s.agent_id)):
                c = counts.setdefault(aid, [0, 0])
                c[0] += int(n_over or 0)
                c[1] += int(n)
    return pd.DataFrame([(a, c[0], c[1]) for a, c in sorted(counts.items())], columns=columns)


def agent_trajectory(engine: Engine, run_id: str, agent_id: int) -> pd.DataFrame:
    """One agent's ticks: backend, action by phase, payoff, reward, fallback, reason, memory snapshot."""
    s = STEPS.c
    q = (select(s.tick, s.backend, s.action, s.payoff, s.reward, s.fallback, s.reason, s.memory)
         .where(s.run_id == run_id, s.agent_id == agent_id).order_by(s.tick))
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(q).mappings().all()]
    for r in rows:
        r["action"] = json_value(r["action"]) or {}
        r["memory"] = json_value(r["memory"]) or {}
    return pd.DataFrame(rows, columns=["tick", "backend", "action", "payoff", "reward", "fallback", "reason", "memory"])


def agent_llm_calls(engine: Engine, run_id: str, agent_id: int, limit: int = 1000) -> pd.DataFrame:
    """The LLM calls of one agent: tick, phase, model, exact prompt and answer, tokens, cache hit, fallback."""
    c = CALLS.c
    q = (select(c.tick, c.phase, c.model_id, c.prompt, c.answer, c.value, c.tokens_in, c.tokens_out, c.latency_s,
                c.cache_hit, c.fallback, c.attempts)
         .where(c.run_id == run_id, c.agent_id == agent_id).order_by(c.tick, c.id).limit(limit))
    with engine.connect() as conn:
        return pd.DataFrame(conn.execute(q).mappings().all(),
                            columns=["tick", "phase", "model_id", "prompt", "answer", "value", "tokens_in", "tokens_out",
                                     "latency_s", "cache_hit", "fallback", "attempts"])


def llm_calls_at(engine: Engine, run_id: str, tick: int, limit: int = 500) -> pd.DataFrame:
    """The LLM calls of one tick, every agent's (the prompts and answers a click on that tick opens): agent_id,
    phase, model, exact prompt and answer, parsed value, tokens, cache hit, fallback, attempts."""
    c = CALLS.c
    q = (select(c.agent_id, c.phase, c.model_id, c.prompt, c.answer, c.value, c.tokens_in, c.tokens_out, c.cache_hit,
                c.fallback, c.attempts)
         .where(c.run_id == run_id, c.tick == int(tick)).order_by(c.id).limit(limit))
    with engine.connect() as conn:
        return pd.DataFrame(conn.execute(q).mappings().all(),
                            columns=["agent_id", "phase", "model_id", "prompt", "answer", "value", "tokens_in", "tokens_out",
                                     "cache_hit", "fallback", "attempts"])


def states(engine: Engine, run_id: str, first: int, last: int) -> dict[int, dict[str, Any]]:
    """The stored world snapshots of ticks `first`..`last` (a replay's frames), by tick."""
    t = TICKS.c
    with engine.connect() as conn:
        rows = conn.execute(select(t.tick, t.state).where(t.run_id == run_id, t.tick >= int(first), t.tick <= int(last))
                            .order_by(t.tick)).all()
    return {int(tick): json_value(state) or {} for tick, state in rows}


def event_timeline(engine: Engine, run_id: str) -> pd.DataFrame:
    """How many events of each kind each tick has (tick, kind, count), counted in SQL: a replay's timeline."""
    e = EVENTS.c
    q = (select(e.tick, e.kind, func.count().label("count")).where(e.run_id == run_id)
         .group_by(e.tick, e.kind).order_by(e.tick, e.kind))
    with engine.connect() as conn:
        return pd.DataFrame(conn.execute(q).mappings().all(), columns=["tick", "kind", "count"])


def _find_key(data: Any, key: str) -> Any:
    """The first value under `key` anywhere in nested dicts/lists, or None."""
    if isinstance(data, dict):
        if key in data and isinstance(data[key], (int, float)) and not isinstance(data[key], bool):
            return data[key]
        for v in data.values():
            found = _find_key(v, key)
            if found is not None:
                return found
    elif isinstance(data, list):
        for v in data:
            found = _find_key(v, key)
            if found is not None:
                return found
    return None


def node_values(engine: Engine, run_id: str, tick: int, agent_ids: Sequence[int], payoffs: bool = True) -> pd.DataFrame:
    """For these agents up to `tick`: total payoff (unless `payoffs` is False: it sums every step of theirs), and
    their latest opinion: an `opinion` in their actions (last 20 ticks), else an `opinion`/`stance` in their events."""
    s = STEPS.c
    ids = [int(a) for a in agent_ids]
    frames = []
    with engine.connect() as conn:
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            totals = conn.execute(select(s.agent_id, func.sum(s.payoff)).where(
                s.run_id == run_id, s.tick <= tick, s.agent_id.in_(chunk)).group_by(s.agent_id)).all() if payoffs \
                else [(a, None) for a in chunk]
            opinions: dict[int, float] = {}
            for aid, action in conn.execute(select(s.agent_id, s.action).where(
                    s.run_id == run_id, s.tick <= tick, s.tick > tick - 20, s.agent_id.in_(chunk)).order_by(s.tick)):
                value = _find_key(json_value(action), "opinion")
                if value is not None:
                    opinions[aid] = float(value)
            missing = [a for a in chunk if a not in opinions]
            if missing:  # else the latest opinion (or stance) an agent's own events carry, e.g. its posts
                e = EVENTS.c
                for aid, data in conn.execute(select(e.actor, e.data).where(
                        e.run_id == run_id, e.tick <= tick, e.actor.in_(missing)).order_by(e.tick, e.id)):
                    data = json_value(data)
                    value = next((v for v in (_find_key(data, k) for k in OPINION_KEYS) if v is not None), None)
                    if value is not None:
                        opinions[aid] = float(value)
            frames.append(pd.DataFrame([{"agent_id": a, "payoff_total": p, "opinion": opinions.get(a)} for a, p in totals]))
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    return df if not df.empty else pd.DataFrame(columns=["agent_id", "payoff_total", "opinion"])


# ----- events ----------------------------------------------------------------------------------
def event_kinds(engine: Engine, run_id: str) -> pd.DataFrame:
    """kind, count, first and last tick of every event kind of a run."""
    e = EVENTS.c
    q = (select(e.kind, func.count().label("count"), func.min(e.tick).label("first_tick"), func.max(e.tick).label("last_tick"))
         .where(e.run_id == run_id).group_by(e.kind).order_by(e.kind))
    with engine.connect() as conn:
        return pd.DataFrame(conn.execute(q).mappings().all(), columns=["kind", "count", "first_tick", "last_tick"])


def events(engine: Engine, run_id: str, *, kinds: Optional[Iterable[str]] = None, ticks: Optional[tuple[int, int]] = None,
           limit: int = 5000) -> pd.DataFrame:
    """Events (tick, kind, actor, target, data) filtered by kinds and an inclusive tick range, at most `limit`."""
    e = EVENTS.c
    q = select(e.id, e.tick, e.kind, e.actor, e.target, e.data).where(e.run_id == run_id)
    if kinds is not None:
        q = q.where(e.kind.in_(list(kinds)))
    if ticks is not None:
        q = q.where(e.tick >= ticks[0], e.tick <= ticks[1])
    with engine.connect() as conn:
        rows = [dict(r) for r in conn.execute(q.order_by(e.tick, e.id).limit(limit)).mappings().all()]
    for r in rows:
        r["data"] = json_value(r["data"]) or {}
    return pd.DataFrame(rows, columns=["id", "tick", "kind", "actor", "target", "data"])


def norm_timeline(engine: Engine, run_id: str) -> pd.DataFrame:
    """Counts of norm events (`norm.statement/compliance/violation/sanction`) per tick and kind."""
    e = EVENTS.c
    q = (select(e.tick, e.kind, func.count().label("count")).where(e.run_id == run_id, e.kind.like("norm.%"))
         .group_by(e.tick, e.kind).order_by(e.tick))
    with engine.connect() as conn:
        df = pd.DataFrame(conn.execute(q).mappings().all(), columns=["tick", "kind", "count"])
    df["kind"] = df["kind"].str.removeprefix("norm.")
    return df


def interaction_edges(engine: Engine, run_id: str, tick: int, *, cumulative: bool = True,
                      exclude: Sequence[str] = ("follow", "unfollow")) -> pd.DataFrame:
    """source, target, weight (number of events) of every actor->target event up to (or at) `tick`, in SQL."""
    e = EVENTS.c
    cond = [e.run_id == run_id, e.actor.is_not(None), e.target.is_not(None), e.actor != e.target,
            e.tick <= tick if cumulative else e.tick == tick]
    if exclude:
        cond.append(e.kind.not_in(list(exclude)))
    q = select(e.actor, e.target, func.count()).where(and_(*cond)).group_by(e.actor, e.target)
    with engine.connect() as conn:
        return pd.DataFrame(conn.execute(q).all(), columns=["source", "target", "weight"])


def follow_edges(engine: Engine, run_id: str, tick: int) -> Optional[pd.DataFrame]:
    """The follow graph after `tick` (source follows target): the run's seeded graph (`runs.initial["follows"]`)
    changed by its `follow`/`unfollow` events up to `tick` (the last one of each pair decides); else a
    `follows`/`edges` list of pairs in the tick's state; None when the run has none of these.

    A run stored before the seeded graph was kept has only its events: `initial_state` is None for it."""
    initial = initial_state(engine, run_id) or {}
    seeded = initial.get("follows") if isinstance(initial, dict) else None
    e = EVENTS.c
    with engine.connect() as conn:
        any_follow = conn.execute(select(e.id).where(e.run_id == run_id, e.kind.in_(["follow", "unfollow"])).limit(1)).first()
        changes: list[tuple[int, int, str]] = []
        if any_follow is not None:
            # the last follow/unfollow of each pair up to `tick` decides; ids grow with ticks, so max(id) is the last
            last = (select(func.max(e.id).label("id")).where(
                e.run_id == run_id, e.kind.in_(["follow", "unfollow"]), e.tick <= tick,
                e.actor.is_not(None), e.target.is_not(None)).group_by(e.actor, e.target).subquery())
            changes = [(int(a), int(t), k) for a, t, k in conn.execute(select(e.actor, e.target, e.kind).join(last, e.id == last.c.id))]
    if seeded is not None or changes:
        edges = {(int(p[0]), int(p[1])) for p in (seeded or ())}
        for a, t, kind in changes:
            if kind == "follow":
                edges.add((a, t))
            else:
                edges.discard((a, t))
        df = pd.DataFrame(sorted(edges), columns=["source", "target"])
        df["weight"] = 1
        return df
    state = state_at(engine, run_id, tick)
    for key in ("follows", "follow_edges", "edges"):
        pairs = state.get(key)
        if isinstance(pairs, list) and all(isinstance(p, (list, tuple)) and len(p) >= 2 for p in pairs):
            return pd.DataFrame([{"source": int(p[0]), "target": int(p[1]), "weight": 1} for p in pairs],
                                columns=["source", "target", "weight"])
    return None


def conversation(engine: Engine, run_id: str, ticks: tuple[int, int], limit: int = 2000) -> pd.DataFrame:
    """What agents said in a tick range: events whose data carries text, with who said it to whom."""
    df = events(engine, run_id, ticks=ticks, limit=limit * 5)
    if df.empty:
        return pd.DataFrame(columns=["id", "tick", "kind", "actor", "target", "text", "data"])
    texts = df["data"].map(lambda d: next((str(d[k]) for k in TEXT_KEYS if isinstance(d, dict) and d.get(k)), None))
    df = df.assign(text=texts)
    df = df[df["text"].notna() & ~df["kind"].str.startswith("norm.")]
    return df[["id", "tick", "kind", "actor", "target", "text", "data"]].head(limit).reset_index(drop=True)


def conversation_ticks(engine: Engine, run_id: str) -> list[int]:
    """Ticks with any non-norm event: where a conversation may be."""
    e = EVENTS.c
    with engine.connect() as conn:
        return [r[0] for r in conn.execute(select(e.tick).where(e.run_id == run_id, e.kind.not_like("norm.%"))
                                           .distinct().order_by(e.tick))]


def policy_versions(engine: Engine, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Policy synthesis (the grid games): every program written (`policy.code`), every episode's scores
    (`policy.scores`) and the incidents (`policy.incident`), each a frame in tick order."""
    rows = events(engine, run_id, kinds=("policy.code", "policy.scores", "policy.incident"), limit=100_000)
    frames = []
    for kind in ("policy.code", "policy.scores", "policy.incident"):
        part = rows[rows["kind"] == kind]
        data = pd.DataFrame([{"tick": t, **d} for t, d in zip(part["tick"], part["data"])])
        frames.append(data)
    return frames[0], frames[1], frames[2]


def studies(engine: Engine, run_id: str) -> list[dict[str, Any]]:
    """The interviews and surveys of a run (runs of origin `interview` / `survey` whose parent it is), newest first:
    id, kind, tick asked at, question, choices, counts and the answers (from the study's one tick)."""
    if not has_schema(engine):
        return []
    r, t = RUNS.c, TICKS.c
    query = (select(r.id, r.origin, r.branch_tick, r.created_at, t.state).join(TICKS, t.run_id == r.id)
             .where(r.parent_id == run_id, r.origin.in_(("interview", "survey"))).order_by(r.created_at.desc()))
    with engine.connect() as conn:
        rows = conn.execute(query).mappings().all()
    out = []
    for row in rows:
        state = json_value(row["state"]) or {}
        out.append({"study_id": row["id"], "kind": row["origin"], "tick": row["branch_tick"],
                    "created_at": _to_dt(row["created_at"]), "question": state.get("question", ""),
                    "choices": state.get("choices"), "counts": state.get("counts") or {},
                    "answers": state.get("answers") or []})
    return out
