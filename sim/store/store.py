"""The run store: one transaction per tick (an env episode's: per group of ticks, `sim.store.grouped`), and every
write of runs, ticks, calls and sweeps, and the reads the runner, the CLI and analysis make.

The store is the one door to the database: this module holds every write and the platform's reads; the app's
read-only queries, aggregated in SQL on an engine that never creates or migrates a database, are beside it
(`sim.store.queries`, `sim.store.event_queries`); the tables are in `sim.store.tables`, the engine and schema
in `sim.store.schema`. No module outside this package spells the store's columns in SQL.
Every public method runs shielded from stop signals (sim.core.interrupts): a Ctrl-C that lands
inside SQLAlchemy would otherwise leave the engine's pool locked.
"""

from __future__ import annotations

import functools
import itertools
import os
import socket
import uuid
from collections import namedtuple
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Optional

from sqlalchemy import case, delete, func, insert, literal, update
from sqlalchemy import select as sa_select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlmodel import Session, SQLModel, select

from sim.core.errors import RunTaken, UsageError
from sim.core.interrupts import shielded
from sim.core.records import StepColumns, TickRecord, reward_vectors
from sim.core.spec import RunSpec
from sim.store.bulk import driver_rows, insert_rows
from sim.store.encoding import dumps, json_safe
from sim.store.schema import as_url, make_engine
from sim.store.snapshots import TickSnapshot
from sim.store.tables import (RUN_STATUSES, AgentStep, EventRow, LLMCall, RewardVectorsRow, Run, RunAgent, SweepRow, Tick,
                              utc_now)
from sim.store.usage import llm_usage
from sim.store.vectors import pack, read_vectors


def _shield_methods(cls: type) -> type:
    """Every public method of `cls` runs shielded from stop signals (sim.core.interrupts): a Ctrl-C
    that lands inside SQLAlchemy would otherwise leave the engine's pool locked."""
    for name, fn in list(vars(cls).items()):
        if callable(fn) and not name.startswith("_"):
            setattr(cls, name, _shielded_call(fn))
    return cls


def _shielded_call(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with shielded():
            return fn(*args, **kwargs)

    return call


@_shield_methods
class Store:
    """Reads and writes runs; every tick is committed in one transaction (`commit_ticks`: several ticks in one)."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        url = as_url(url)  # a bare file path is a SQLite file
        self.url = url
        self.engine = make_engine(url, create=create)

    # ----- writing ----------------------------------------------------------------------
    def create_run(self, spec: RunSpec, versions: dict[str, str], *, origin: str = "run", parent_id: Optional[str] = None,
                   branch_tick: Optional[int] = None, sweep_id: Optional[str] = None, backends: str = "",
                   run_id: Optional[str] = None) -> str:
        """Insert a `running` run owned by this process; returns its id. With a given `run_id` (a sweep's) that
        another process inserted first: RunTaken."""
        given = run_id is not None
        run_id = run_id or uuid.uuid4().hex[:12]
        with Session(self.engine) as s:
            s.add(Run(id=run_id, scenario=spec.scenario, seed=spec.seed, policy=spec.policy,
                      spec_digest=spec.digest(), spec=spec.model_dump(mode="json"), versions=versions, origin=origin,
                      parent_id=parent_id, branch_tick=branch_tick, sweep_id=sweep_id, backends=backends,
                      owner_pid=os.getpid(), owner_host=socket.gethostname(), heartbeat_at=utc_now()))
            try:
                s.commit()
            except IntegrityError:
                if not given:
                    raise
                raise RunTaken(f"run {run_id} was started by another process meanwhile") from None
        return run_id

    def record_tick(self, run_id: str, record: TickRecord, llm_calls: Iterable[dict[str, Any]] = (), duration_s: float = 0.0) -> None:
        """Commit a tick, its agent steps, events and LLM calls, and the run's progress, at once.

        The big tables' rows (agent steps, events, LLM calls) go in bulk (sim.store.bulk: COPY on
        PostgreSQL, multi-row INSERTs on SQLite), encoded here once, not row by row through the ORM; the
        steps' reward vectors go in one packed row (sim.store.vectors).
        """
        self.commit_ticks([self.tick_rows(run_id, record, llm_calls, duration_s)])

    def tick_rows(self, run_id: str, record: TickRecord, llm_calls: Iterable[dict[str, Any]] = (),
                  duration_s: float = 0.0) -> TickRows:
        """A tick's rows, encoded now (nothing of the live model is kept), for `commit_ticks`."""
        t = record.tick
        if isinstance(record.steps, StepColumns):
            steps = record.steps.rows((run_id, t), dumps)
        else:
            steps = [st.row((run_id, t), dumps) for st in record.steps]
        vectors = reward_vectors(record.steps)
        dialect = self.engine.dialect
        tick = driver_rows(dialect, Tick.__table__, _TICK_COLUMNS, ({"run_id": run_id, "tick": t, "metrics": record.metrics,
                                                                     "state": record.state, "duration_s": duration_s},), dumps)
        events = driver_rows(dialect, EventRow.__table__, _EVENT_COLUMNS,
                             ({"run_id": run_id, "tick": t, "kind": ev.kind, "actor": ev.actor, "target": ev.target,
                               "data": ev.data} for ev in record.events), dumps)
        calls = driver_rows(dialect, LLMCall.__table__, _CALL_COLUMNS, (_call_row({"run_id": run_id, **c}) for c in llm_calls),
                            dumps)
        packed = None if vectors is None else {"run_id": run_id, "tick": t, "data": pack(vectors)}
        return TickRows(run_id, t, tick, steps, packed, events, calls)

    def commit_ticks(self, ticks: Sequence[TickRows]) -> None:
        """Commit ticks (`tick_rows`, in order) in one transaction, and each run's progress: all of them or none.
        One tick is `record_tick` (its rows used as they are: the path every tick of a run takes); several, an env
        episode's group commit (`sim.store.grouped`)."""
        if not ticks:
            return
        if len(ticks) == 1:
            [one] = ticks
            rows, steps, events, calls = one.tick, one.steps, one.events, one.calls
        else:
            rows, steps, events, calls = (list(itertools.chain.from_iterable(getattr(t, name) for t in ticks))
                                          for name in ("tick", "steps", "events", "calls"))
        vectors = [t.vectors for t in ticks if t.vectors is not None]
        last = {t.run_id: t.number for t in ticks}
        with self.engine.begin() as conn:
            insert_rows(conn, Tick.__table__, _TICK_COLUMNS, rows)
            insert_rows(conn, AgentStep.__table__, _STEP_COLUMNS, steps)
            if vectors:
                conn.execute(insert(RewardVectorsRow.__table__), vectors)
            insert_rows(conn, EventRow.__table__, _EVENT_COLUMNS, events)
            insert_rows(conn, LLMCall.__table__, _CALL_COLUMNS, calls)
            for run_id, t in last.items():
                conn.execute(update(Run.__table__).where(Run.__table__.c.id == run_id).values(ticks=t, heartbeat_at=utc_now()))

    def set_initial(self, run_id: str, initial: dict[str, Any]) -> None:
        """Store what the run starts from (`SocietyModel.initial_state`), once: a run that has it keeps it (a resumed
        or forked run rebuilds the same world from its seed)."""
        runs = Run.__table__
        with self.engine.begin() as conn:  # (a JSON column stores None as JSON null, which IS NULL does not match)
            if conn.execute(sa_select(runs.c.initial).where(runs.c.id == run_id)).scalar() is None:
                conn.execute(update(runs).where(runs.c.id == run_id).values(initial=json_safe(initial)))

    def add_agents(self, run_id: str, profiles: Sequence[dict[str, Any]]) -> None:
        """Store the agents that joined (`SocietyModel.take_joined`): those already stored are left as they are, so
        a resumed run's replayed ticks add nothing twice."""
        if not profiles:
            return
        table = RunAgent.__table__
        core = _AGENT_COLUMNS[1:-1]
        with self.engine.begin() as conn:
            have = set(conn.execute(sa_select(table.c.agent_id).where(table.c.run_id == run_id)).scalars())
            rows = driver_rows(conn.dialect, table, _AGENT_COLUMNS,
                               ({"run_id": run_id, **{k: p.get(k) for k in core},
                                 "profile": json_safe({k: v for k, v in p.items() if k not in core})}
                                for p in profiles if int(p["agent_id"]) not in have), dumps)
            insert_rows(conn, table, _AGENT_COLUMNS, rows)

    def run_agents(self, run_id: str) -> list[RunAgent]:
        """The agents of a run, by id ([] for runs stored before `run_agents`)."""
        with Session(self.engine) as s:
            return list(s.exec(select(RunAgent).where(RunAgent.run_id == run_id).order_by(RunAgent.agent_id)))

    def finish_run(self, run_id: str, status: str, reason: Optional[str], duration_s: float,
                   final_metrics: Optional[dict[str, Any]] = None) -> None:
        """Close a run: its status, reason, the final summary (whole-run metrics), whether the cache served it all."""
        if status not in RUN_STATUSES:
            raise ValueError(f"bad status {status!r}")
        with Session(self.engine) as s:
            run = s.get(Run, run_id)
            run.status, run.reason, run.finished_at, run.duration_s = status, reason, utc_now(), duration_s
            calls, hits = s.exec(select(func.count(), func.coalesce(func.sum(case((LLMCall.cache_hit, 1), else_=0)), 0))  # PostgreSQL has no sum(boolean)
                                 .where(LLMCall.run_id == run_id)).one()
            run.cached = None if not calls else bool(hits == calls)
            run.heartbeat_at = utc_now()
            if final_metrics is not None:
                run.final_metrics = json_safe(final_metrics)
            s.add(run)
            s.commit()
        self.checkpoint()

    def checkpoint(self) -> None:
        """SQLite: copy the write-ahead log into the database file (without waiting for readers), so that a copy
        of `runs.db` alone holds every finished run. Nothing to do on other databases."""
        if self.engine.dialect.name == "sqlite":
            with self.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def close(self) -> None:
        """Close the store's connections. On SQLite the last connection to close folds the write-ahead
        log into the database file, so that `runs.db` alone holds every committed tick."""
        self.engine.dispose()

    def delete_run(self, run_id: str) -> bool:
        """Delete a run and every row that belongs to it (ticks, steps, events, LLM calls) in one transaction.

        Returns False when no run has this exact id (nothing is deleted).
        """
        runs = Run.__table__
        with self.engine.begin() as conn:
            if conn.execute(sa_select(runs.c.id).where(runs.c.id == run_id)).first() is None:
                return False
            for table in (LLMCall, EventRow, RewardVectorsRow, AgentStep, Tick, RunAgent):
                conn.execute(delete(table.__table__).where(table.__table__.c.run_id == run_id))
            conn.execute(delete(runs).where(runs.c.id == run_id))
        return True

    # ----- reading ---------------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run:
        """A run by id or unique id prefix; a UsageError naming the problem otherwise."""
        return self._by_id_or_prefix(Run, run_id, "run", "`societas list` shows the stored runs")

    def _by_id_or_prefix(self, model: type[SQLModel], ident: str, noun: str, hint: str) -> Any:
        """The row of `model` whose id is `ident` or the only one it prefixes (taken literally: `%`, `_` are no
        wildcards); a UsageError for a non-string or empty id, an ambiguous prefix or no match (with `hint`)."""
        if not isinstance(ident, str) or not ident:
            raise UsageError(f"a {noun} id is a non-empty string (a {noun}'s id or a unique prefix of it), not {ident!r}")
        with Session(self.engine) as s:
            row = s.get(model, ident)
            if row is None:
                matches = s.exec(select(model).where(model.id.startswith(ident, autoescape=True))).all()
                if len(matches) > 1:
                    raise UsageError(f"{noun} id prefix {ident!r} is ambiguous: {', '.join(m.id for m in matches)}")
                row = matches[0] if matches else None
        if row is None:
            raise UsageError(f"unknown {noun} id {ident!r}; {hint}")
        return row

    def list_runs(self) -> list[Run]:
        with Session(self.engine) as s:
            return list(s.exec(select(Run).order_by(Run.created_at)).all())

    def forks_of(self, parent_id: str, branch_tick: int) -> list[Run]:
        """The forks of `parent_id` at `branch_tick` (rollouts among them), oldest first."""
        with Session(self.engine) as s:
            return list(s.exec(select(Run).where(Run.parent_id == parent_id, Run.branch_tick == branch_tick,
                                                 Run.origin == "fork").order_by(Run.created_at)).all())

    def _rows(self, model: type[SQLModel], run_id: str) -> list[Any]:
        with Session(self.engine) as s:
            return list(s.exec(select(model).where(model.run_id == run_id).order_by(*_order(model))).all())

    def ticks(self, run_id: str) -> list[Tick]:
        return self._rows(Tick, run_id)

    def steps(self, run_id: str) -> list[AgentStep]:
        """Every agent step of the run, by tick and agent, each with its reward vector in `components`."""
        rows = self._rows(AgentStep, run_id)
        with self.engine.connect() as conn:
            vectors = _Vectors(conn, run_id)
            for r in rows:
                if r.components is None:
                    r.components = vectors.of(r.tick, r.agent_id)
        return rows

    def events(self, run_id: str, tick: Optional[int] = None) -> list[EventRow]:
        if tick is None:
            return self._rows(EventRow, run_id)
        with Session(self.engine) as s:
            return list(s.exec(select(EventRow).where(EventRow.run_id == run_id, EventRow.tick == tick).order_by(EventRow.id)).all())

    def iter_rows(self, model: type[SQLModel], run_id: str, chunk: int = 20_000) -> Iterator[list[Any]]:
        """A run's rows of one per-run table, in the order `ticks`/`steps`/`events`/`llm_calls` return them, as
        chunks of at most `chunk` rows read as a stream (an export of millions of rows holds one chunk); agent
        steps with their reward vectors in `components`, as `steps` gives them."""
        columns = model.__table__.c
        query = sa_select(model.__table__).where(columns.run_id == run_id).order_by(*_order(model))
        with self.engine.connect() as conn:
            vectors = _Vectors(conn, run_id) if model is AgentStep else None
            for part in conn.execution_options(stream_results=True, yield_per=chunk).execute(query).partitions():
                yield list(part) if vectors is None else [vectors.filled(r) for r in part]

    def fallback_count(self, run_id: str) -> int:
        """Agent steps with a fallback decision (counted in SQL)."""
        with Session(self.engine) as s:
            return int(s.exec(select(func.count()).select_from(AgentStep).where(AgentStep.run_id == run_id,
                                                                                AgentStep.fallback == True)).one())  # noqa: E712

    def llm_calls(self, run_id: str) -> list[LLMCall]:
        return self._rows(LLMCall, run_id)

    def llm_usage(self, run_ids: Sequence[str]) -> list[dict[str, Any]]:
        """LLM calls per run, backend and model, aggregated in SQL (`sim.store.usage.llm_usage`)."""
        return llm_usage(self.engine, run_ids)

    def cache_lookup(self, keys: Sequence[str]) -> dict[str, Any]:
        """Original (non-hit) calls for these cache keys, first stored wins: the columns a cached answer reads, as
        rows with the attributes of `sim.contracts.backend.CachedCall` (not ORM objects with their prompts: a lookup
        through the ORM took ~0.6 ms, paid by every batch of a run)."""
        found: dict[str, Any] = {}
        if not keys:
            return found
        c = LLMCall.__table__.c
        cols = (c.key, c.value, c.answer, c.tokens_in, c.tokens_out, c.fallback, c.attempts, c.completion_ids, c.logprobs)
        with self.engine.connect() as conn:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start:start + 500])
                query = sa_select(*cols).where(c.key.in_(chunk), c.cache_hit == False).order_by(c.id)  # noqa: E712
                for row in conn.execute(query):
                    found.setdefault(row.key, row)
        return found

    def count_runs(self) -> int:
        with Session(self.engine) as s:
            return s.exec(select(func.count()).select_from(Run)).one()

    # ----- ticks as snapshots: what resume, fork and replay compare -----------------------------
    def tick_snapshots(self, run_id: str, tick: Optional[int] = None) -> dict[int, TickSnapshot]:
        """tick -> its snapshot (sim.store.snapshots), for every stored tick of the run or only `tick`."""
        return dict(self.iter_tick_snapshots(run_id, tick))

    def iter_tick_snapshots(self, run_id: str, tick: Optional[int] = None,
                            chunk: int = 20_000) -> Iterator[tuple[int, TickSnapshot]]:
        """(tick, snapshot) for every stored tick of the run (or only `tick`), in order, read as a stream: memory
        holds one tick and a chunk of rows, whatever the run's size (a replay of millions of agent steps)."""
        t, s, e = Tick.__table__.c, AgentStep.__table__.c, EventRow.__table__.c

        def at(c: Any) -> list[Any]:
            return [c.run_id == run_id] + ([c.tick == tick] if tick is not None else [])

        with self.engine.connect() as conn:
            conn = conn.execution_options(stream_results=True, yield_per=chunk)
            ticks = conn.execute(sa_select(t.tick, t.metrics, t.state).where(*at(t)).order_by(t.tick))
            steps = _Rows(conn.execute(sa_select(s.tick, s.agent_id, s.action, s.payoff, s.reward, s.fallback, s.memory,
                                                 s.components)
                                       .where(*at(s)).order_by(s.tick, s.agent_id)))
            events = _Rows(conn.execute(sa_select(e.tick, e.kind, e.actor, e.target, e.data)
                                        .where(*at(e)).order_by(e.tick, e.id)))
            vectors = _Vectors(conn, run_id, tick)
            for row in ticks:
                snap = TickSnapshot(row.metrics, row.state, [], [])
                for r in steps.up_to(row.tick):
                    vec = r.components if r.components is not None else vectors.of(row.tick, r.agent_id)
                    snap.steps.append([r.agent_id, r.action, r.payoff, r.reward, bool(r.fallback), r.memory, vec])
                for r in events.up_to(row.tick):
                    snap.events.append([r.kind, r.actor, r.target, r.data])
                yield row.tick, snap

    def tick_range(self, run_id: str) -> tuple[int, int]:
        """(how many ticks the run has stored, the last tick's number): equal when they are 1..n."""
        t = Tick.__table__.c
        with self.engine.connect() as conn:
            count, last = conn.execute(sa_select(func.count(), func.coalesce(func.max(t.tick), 0))
                                       .where(t.run_id == run_id)).one()
        return int(count), int(last)

    # ----- taking over and branching runs ------------------------------------------------------
    def claim(self, run: Run) -> str:
        """Take over a run row atomically (compare-and-set on its status, owner and heartbeat): status back to
        running, owned by this process. UsageError when another process took it meanwhile."""
        c = Run.__table__.c
        with self.engine.begin() as conn:
            result = conn.execute(
                update(Run.__table__)
                .where(c.id == run.id, c.status == run.status,
                       c.owner_pid.is_(None) if run.owner_pid is None else c.owner_pid == run.owner_pid,
                       c.heartbeat_at.is_(None) if run.heartbeat_at is None else c.heartbeat_at == run.heartbeat_at)
                .values(status="running", reason=None, finished_at=None, owner_pid=os.getpid(),
                        owner_host=socket.gethostname(), heartbeat_at=utc_now()))
        if result.rowcount != 1:
            raise RunTaken(f"run {run.id} was taken over by another process meanwhile; see `societas show {run.id}`")
        return run.id

    def copy_ticks(self, parent_id: str, fork_id: str, upto: int) -> None:
        """Copy a parent's ticks 1..upto (ticks, agent steps, events, LLM calls as cache hits) into a fork, at once.
        (Its initial state and agents are the fork's own model's, stored as it replays: the same world.)"""
        t, s, e, c = Tick.__table__, AgentStep.__table__, EventRow.__table__, LLMCall.__table__
        v = RewardVectorsRow.__table__
        with self.engine.begin() as conn:
            for table, order, cols, replace in (
                    (t, t.c.tick, ("tick", "metrics", "state", "duration_s"), {}),
                    (v, v.c.tick, ("tick", "data"), {}),
                    (s, s.c.id, ("tick", "agent_id", "backend", "action", "payoff", "reward", "fallback", "reason",
                                 "memory", "components"), {}),
                    (e, e.c.id, ("tick", "kind", "actor", "target", "data"), {}),
                    (c, c.c.id, ("key", "tick", "agent_id", "phase", "backend", "model_id", "prompt", "answer", "value",
                                 "tokens_in", "tokens_out", "latency_s", "cache_hit", "fallback", "attempts",
                                 "completion_ids", "logprobs"),
                     {"latency_s": literal(0.0), "cache_hit": literal(True)})):
                chosen = [replace.get(name, table.c[name]) for name in cols]
                rows = sa_select(literal(fork_id), *chosen).where(table.c.run_id == parent_id, table.c.tick <= upto)
                conn.execute(insert(table).from_select(["run_id", *cols], rows.order_by(order)))
            conn.execute(update(Run.__table__).where(Run.__table__.c.id == fork_id).values(ticks=upto))

    # ----- sweeps -------------------------------------------------------------------------------------------------
    def sweep_row(self, sweep_id: str) -> Optional[SweepRow]:
        """The sweep with exactly this id, or None."""
        with Session(self.engine) as s:
            return s.get(SweepRow, sweep_id)

    def save_sweep(self, row: SweepRow) -> None:
        """Record a sweep, or mark an existing one as run again now (another driver may record it at the same moment)."""
        with Session(self.engine) as s:
            existing = s.get(SweepRow, row.id)
            if existing is None:
                s.add(row)
            else:
                existing.updated_at = utc_now()
                s.add(existing)
            try:
                s.commit()
            except SQLAlchemyError:  # another driver recorded it meanwhile
                s.rollback()

    def get_sweep(self, sweep_id: str) -> SweepRow:
        """A sweep by id or unique prefix; UsageError otherwise."""
        return self._by_id_or_prefix(SweepRow, sweep_id, "sweep", "`societas sweep FILE` prints the id of the sweep it runs")

    def sweep_runs(self, sweep_id: str) -> list[Run]:
        """Every run that carries the sweep's id, oldest first."""
        with Session(self.engine) as s:
            return list(s.exec(select(Run).where(Run.sweep_id == sweep_id).order_by(Run.created_at)).all())


#: the columns each bulk insert fills (sim.store.bulk), in the order of its rows; ids come from the database
_TICK_COLUMNS = ("run_id", "tick", "metrics", "state", "duration_s")
_STEP_COLUMNS = ("run_id", "tick", "agent_id", "backend", "action", "payoff", "reward", "fallback", "reason", "memory")
_EVENT_COLUMNS = ("run_id", "tick", "kind", "actor", "target", "data")
_CALL_COLUMNS = tuple(c.name for c in LLMCall.__table__.columns if c.name != "id")
_CALL_KEYS = frozenset(_CALL_COLUMNS)
_AGENT_COLUMNS = ("run_id", "agent_id", "joined", "role", "policy", "strategy", "persona", "profile")

_LLM_DEFAULTS = {"tokens_in": 0, "tokens_out": 0, "latency_s": 0.0, "cache_hit": False, "fallback": False, "attempts": 1, "value": None,
                 "completion_ids": None, "logprobs": None}


def _call_row(call: dict[str, Any]) -> dict[str, Any]:
    """An llm_calls row with every column present; a key that is no column of it is refused (as SQLAlchemy's insert
    refused it), not dropped."""
    unknown = call.keys() - _CALL_KEYS
    if unknown:
        raise ValueError(f"an LLM call record with keys that are no llm_calls column: {', '.join(sorted(unknown))}")
    return {**_LLM_DEFAULTS, **call}


def _order(model: type[SQLModel]) -> tuple[Any, ...]:
    """The order a per-run table's rows are read in: by tick, then agent (steps) or insertion (events, calls)."""
    c = model.__table__.c
    return (c.tick, c.agent_id) if model is AgentStep else (c.tick, c.id) if model in (EventRow, LLMCall) else (c.tick,)


class TickRows(NamedTuple):
    """A tick's rows as `Store.tick_rows` encodes them: the tick's own (one), its agent steps, its packed reward
    vectors (None: none), its events and LLM calls; `number` is the tick."""

    run_id: str
    number: int
    tick: list[tuple]
    steps: list[tuple]
    vectors: Optional[dict[str, Any]]
    events: list[tuple]
    calls: list[tuple]


_StepRow = namedtuple("_StepRow", [c.name for c in AgentStep.__table__.columns])  # type: ignore[misc]


class _Vectors:
    """A run's packed reward vectors (sim.store.vectors), read as a stream by tick and unpacked one tick at a time;
    asked in tick order (as the agent steps are read)."""

    def __init__(self, conn: Any, run_id: str, tick: Optional[int] = None) -> None:
        c = RewardVectorsRow.__table__.c
        query = sa_select(c.tick, c.data).where(c.run_id == run_id, *([c.tick == tick] if tick is not None else []))
        self._rows = _Rows(conn.execution_options(stream_results=True, yield_per=64).execute(query.order_by(c.tick)))
        self._tick: Optional[int] = None
        self._vectors: dict[int, dict[str, Any]] = {}

    def of(self, tick: int, agent_id: int) -> Optional[dict[str, Any]]:
        """The agent's reward vector at `tick` (None when the tick has none packed, or not for this agent)."""
        if tick != self._tick:
            self._tick = tick
            self._vectors = {}
            for r in self._rows.up_to(tick):
                self._vectors = read_vectors(r.data)
        return self._vectors.get(agent_id)

    def filled(self, row: Any) -> Any:
        """An agent_steps row with its packed reward vector in `components` (the row itself when it has its own, or
        none is packed for it)."""
        if row.components is not None:
            return row
        vec = self.of(row.tick, row.agent_id)
        return row if vec is None else _StepRow(*row)._replace(components=vec)


class _Rows:
    """Rows ordered by tick, handed over one tick at a time (rows of ticks that have no `ticks` row are dropped)."""

    def __init__(self, rows: Iterable[Any]) -> None:
        self._rows = iter(rows)
        self._next: Any = next(self._rows, None)

    def up_to(self, tick: int) -> Iterator[Any]:
        """The leading rows with tick <= `tick`, yielding only those of `tick` itself."""
        while self._next is not None and self._next.tick <= tick:
            row, self._next = self._next, next(self._rows, None)
            if row.tick == tick:
                yield row
