"""The run store: SQLModel tables and the `Store` that writes one transaction per tick.

SQLite by default; any SQLAlchemy URL works (PostgreSQL with `postgresql+psycopg://...`).
All table models live here, beside the engine factory.
"""

from __future__ import annotations

import fcntl
import functools
import json
import math
import os
import socket
import uuid
from contextlib import contextmanager
from pathlib import Path
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import JSON, Column, Index, Integer, Text, case, cast, delete, event, func, insert, inspect, make_url, text, update
from sqlalchemy import select as sa_select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, create_engine, select

from sim.errors import UsageError
from sim.interrupts import shielded
from sim.model import StepColumns, TickRecord

RUN_STATUSES = ("running", "finished", "failed", "collapsed", "stopped")  # stopped: ended on request before its horizon


def _now() -> datetime:
    return datetime.now(timezone.utc)


class Run(SQLModel, table=True):
    """One run: its spec, status (running / finished / failed / collapsed), timings and final metrics."""

    __tablename__ = "runs"
    id: str = Field(primary_key=True)
    scenario: str = Field(index=True)
    seed: int
    policy: str
    spec_digest: str = Field(index=True)
    spec: dict = Field(default_factory=dict, sa_column=Column(JSON))
    status: str = Field(default="running", index=True)
    reason: Optional[str] = None
    ticks: int = 0
    final_metrics: dict = Field(default_factory=dict, sa_column=Column(JSON))
    versions: dict = Field(default_factory=dict, sa_column=Column(JSON))
    created_at: datetime = Field(default_factory=_now)
    finished_at: Optional[datetime] = None
    duration_s: float = 0.0
    origin: str = Field(default="run", sa_column_kwargs={"server_default": "run"})  # run / replay / resume / fork
    parent_id: Optional[str] = Field(default=None, index=True)  # the run replayed or forked
    branch_tick: Optional[int] = None  # a fork's last tick taken from its parent
    sweep_id: Optional[str] = Field(default=None, index=True)
    backends: str = Field(default="", sa_column_kwargs={"server_default": ""})  # who decided: "llm+scripted"
    cached: Optional[bool] = None  # every LLM call answered from the cache (None: no LLM calls)
    owner_pid: Optional[int] = None  # the process running it, and where: tells a live run from a stale one
    owner_host: Optional[str] = None
    heartbeat_at: Optional[datetime] = None


class SweepRow(SQLModel, table=True):
    """A sweep: its definition (scenario, base, grid, seeds, policy), how many runs it has, where it came from."""

    __tablename__ = "sweeps"
    id: str = Field(primary_key=True)
    scenario: str
    definition: dict = Field(default_factory=dict, sa_column=Column(JSON))
    total: int
    source: Optional[str] = None  # the sweep file it was read from
    created_at: datetime = Field(default_factory=_now)
    updated_at: Optional[datetime] = None


class Tick(SQLModel, table=True):
    """A committed tick: its metrics and a snapshot of the world."""

    __tablename__ = "ticks"
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    tick: int
    metrics: dict = Field(default_factory=dict, sa_column=Column(JSON))
    state: dict = Field(default_factory=dict, sa_column=Column(JSON))
    duration_s: float = 0.0


class AgentStep(SQLModel, table=True):
    """One agent's tick: its actions by phase, payoff, reward, fallback flag and memory."""

    __tablename__ = "agent_steps"
    __table_args__ = (Index("ix_agent_steps_run_id_tick", "run_id", "tick"),)
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id")
    tick: int
    agent_id: int
    backend: str
    action: dict = Field(default_factory=dict, sa_column=Column(JSON))
    payoff: float
    reward: float
    fallback: bool = False
    reason: Optional[str] = None
    memory: dict = Field(default_factory=dict, sa_column=Column(JSON))


class EventRow(SQLModel, table=True):
    """Messages, harvests, sanctions, norm events, trades."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_run_id_tick", "run_id", "tick"),)
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id")
    tick: int
    kind: str = Field(index=True)
    actor: Optional[int] = None
    target: Optional[int] = None
    data: dict = Field(default_factory=dict, sa_column=Column(JSON))


class LLMCall(SQLModel, table=True):
    """One LLM call (or cache hit): the cache key, prompt, answer, tokens and latency."""

    __tablename__ = "llm_calls"
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
    key: str = Field(index=True)
    tick: int
    agent_id: int
    phase: str
    backend: str
    model_id: str
    prompt: str = Field(sa_column=Column(Text))
    answer: str = Field(sa_column=Column(Text))
    value: Any = Field(default=None, sa_column=Column(JSON))
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    cache_hit: bool = False
    fallback: bool = False
    attempts: int = 1


def sqlite_path(url: str) -> Optional[Path]:
    """The database file of a SQLite URL (None for other databases and in-memory SQLite)."""
    if not url.startswith("sqlite"):
        return None
    try:
        database = make_url(url).database
    except ArgumentError:
        return None
    return Path(database) if database and database != ":memory:" else None


def make_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for `url` with the schema at head; a UsageError if it cannot be opened.

    `create=False` (read-only commands) never creates a database: a missing SQLite file is an
    error. A fresh database gets the schema; an older one must be upgraded explicitly
    (`societas db upgrade`); one newer than this code is refused.
    """
    path = sqlite_path(url)
    if path is not None:
        if not path.exists():
            if not create:
                raise UsageError(f"no store at {str(path)!r} (nothing has been run there yet); `societas run` creates one")
            if not path.parent.is_dir():
                raise UsageError(f"cannot open database {url!r}: folder {str(path.parent)!r} does not exist")
        elif path.is_dir():
            raise UsageError(f"cannot open database {url!r}: {str(path)!r} is a folder")
    try:
        kwargs: dict[str, Any] = {"json_serializer": dumps}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 60}
        engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(engine, "connect", _sqlite_pragmas)
        prepare_schema(engine, path, upgrade=False)
        return engine
    except UsageError:
        raise
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise UsageError(f"cannot open database {url!r}: {str(exc).splitlines()[0]}") from None
    except (OperationalError, SQLAlchemyError) as exc:
        raise UsageError(f"cannot open database {url!r}: {str(getattr(exc, 'orig', exc)).splitlines()[0]}") from None


MIGRATIONS = Path(__file__).with_name("migrations")


def _alembic_config() -> Any:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def schema_versions(engine: Engine) -> tuple[Optional[str], str]:
    """(the database's schema revision or None if it has none, the newest this code knows)."""
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(_alembic_config()).get_current_head()
    with engine.connect() as conn:
        current = MigrationContext.configure(conn).get_current_revision()
        if current is None and inspect(conn).has_table("runs"):
            current = "unversioned"
    return current, head


@contextmanager
def _schema_lock(engine: Engine, path: Optional[Path]) -> Iterator[None]:
    """One process at a time creates or migrates a schema (concurrent first use of a new store).

    An SQLite store is locked through its folder, never by opening the database file itself: closing
    any descriptor of that file drops every POSIX lock this process holds on it, SQLite's included, and
    a reader in another process, seeing no other connection, would then checkpoint and delete the WAL
    this process is still writing to (its later commits were lost that way).
    """
    if path is not None:
        try:
            fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise UsageError(f"cannot open database at {str(path)!r}: cannot lock its folder ({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock
    elif engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(7242531)"))
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(7242531)"))
                conn.commit()
    else:
        yield


def prepare_schema(engine: Engine, path: Optional[Path] = None, *, upgrade: bool = False) -> str:
    """Create the schema in an empty database; with `upgrade`, migrate an older one. Returns what was done."""
    from alembic import command
    from alembic.script import ScriptDirectory

    current, head = schema_versions(engine)
    if current == head:
        return "current"
    with _schema_lock(engine, path):
        current, head = schema_versions(engine)  # another process may have done it meanwhile
        if current == head:
            return "current"
        known = {rev.revision for rev in ScriptDirectory.from_config(_alembic_config()).walk_revisions()}
        if current is not None and current not in known:
            raise UsageError(f"the store's schema ({current}) is not one this societas knows (newest: {head}); "
                             "a newer societas wrote it: upgrade societas to read it")
        if current is not None and not upgrade:
            raise UsageError(f"the store's schema is {current}, this societas needs {head}: "
                             "run `societas db upgrade` (with the same --db) first")
        cfg = _alembic_config()
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "head")
        return "created" if current is None else f"upgraded {current} -> {head}"


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    """Foreign keys on; WAL so readers never block the writer and a killed writer loses only its open tick."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _shield_methods(cls: type) -> type:
    """Every public method of `cls` runs shielded from stop signals (sim.interrupts): a Ctrl-C
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
    """Reads and writes runs; every tick is committed in one transaction."""

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = url
        self.engine = make_engine(url, create=create)
        mark = "?" if self.engine.dialect.paramstyle == "qmark" else "%s"
        cols = ("run_id", "tick", "agent_id", "backend", "action", "payoff", "reward", "fallback", "reason", "memory")
        self._steps_sql = f"INSERT INTO agent_steps ({', '.join(cols)}) VALUES ({', '.join([mark] * len(cols))})"

    # ----- writing ----------------------------------------------------------------------
    def create_run(self, spec: Any, versions: dict[str, str], *, origin: str = "run", parent_id: Optional[str] = None,
                   branch_tick: Optional[int] = None, sweep_id: Optional[str] = None, backends: str = "",
                   run_id: Optional[str] = None) -> str:
        """Insert a `running` run owned by this process; returns its id."""
        run_id = run_id or uuid.uuid4().hex[:12]
        with Session(self.engine) as s:
            s.add(Run(id=run_id, scenario=spec.scenario, seed=spec.seed, policy=spec.policy,
                      spec_digest=spec.digest(), spec=spec.model_dump(mode="json"), versions=versions, origin=origin,
                      parent_id=parent_id, branch_tick=branch_tick, sweep_id=sweep_id, backends=backends,
                      owner_pid=os.getpid(), owner_host=socket.gethostname(), heartbeat_at=_now()))
            s.commit()
        return run_id

    def record_tick(self, run_id: str, record: TickRecord, llm_calls: Iterable[dict[str, Any]] = (), duration_s: float = 0.0) -> None:
        """Commit a tick, its agent steps, events and LLM calls, and the run's progress, at once.

        Rows go in bulk (one executemany per table, SQLAlchemy Core), not object by object
        through the ORM: a tick of 10,000 agents costs milliseconds, not seconds.
        """
        t = record.tick
        if isinstance(record.steps, StepColumns):
            steps = record.steps.rows((run_id, t), dumps)
        else:
            steps = [st.row((run_id, t), dumps) for st in record.steps]
        events = [{"run_id": run_id, "tick": t, "kind": ev.kind, "actor": ev.actor, "target": ev.target, "data": ev.data}
                  for ev in record.events]
        calls = [{"run_id": run_id, **c} for c in llm_calls]
        with self.engine.begin() as conn:
            conn.execute(insert(Tick.__table__), [{"run_id": run_id, "tick": t, "metrics": record.metrics,
                                                   "state": record.state, "duration_s": duration_s}])
            if steps:
                # the big table: straight to the driver's executemany with JSON already encoded
                conn.exec_driver_sql(self._steps_sql, steps)
            if events:
                conn.execute(insert(EventRow.__table__), events)
            if calls:
                conn.execute(insert(LLMCall.__table__), [_call_row(c) for c in calls])
            conn.execute(update(Run.__table__).where(Run.__table__.c.id == run_id).values(ticks=t, heartbeat_at=_now()))

    def finish_run(self, run_id: str, status: str, reason: Optional[str], duration_s: float,
                   final_metrics: Optional[dict[str, Any]] = None) -> None:
        """Close a run: its status, reason, the final summary (whole-run metrics), whether the cache served it all."""
        if status not in RUN_STATUSES:
            raise ValueError(f"bad status {status!r}")
        with Session(self.engine) as s:
            run = s.get(Run, run_id)
            run.status, run.reason, run.finished_at, run.duration_s = status, reason, _now(), duration_s
            calls, hits = s.exec(select(func.count(), func.coalesce(func.sum(case((LLMCall.cache_hit, 1), else_=0)), 0))  # PostgreSQL has no sum(boolean)
                                 .where(LLMCall.run_id == run_id)).one()
            run.cached = None if not calls else bool(hits == calls)
            run.heartbeat_at = _now()
            if final_metrics is not None:
                run.final_metrics = _clean(final_metrics)
            s.add(run)
            s.commit()

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
            for table in (LLMCall, EventRow, AgentStep, Tick):
                conn.execute(delete(table.__table__).where(table.__table__.c.run_id == run_id))
            conn.execute(delete(runs).where(runs.c.id == run_id))
        return True

    # ----- reading ---------------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run:
        """A run by id or unique id prefix; a UsageError naming the problem otherwise."""
        with Session(self.engine) as s:
            run = s.get(Run, run_id)
            if run is None and run_id:
                matches = s.exec(select(Run).where(Run.id.startswith(run_id, autoescape=True))).all()
                if len(matches) == 1:
                    run = matches[0]
                elif len(matches) > 1:
                    raise UsageError(f"run id prefix {run_id!r} is ambiguous: {', '.join(m.id for m in matches)}")
            if run is None:
                raise UsageError(f"unknown run id {run_id!r}; `societas list` shows the stored runs")
            return run

    def list_runs(self) -> list[Run]:
        with Session(self.engine) as s:
            return list(s.exec(select(Run).order_by(Run.created_at)).all())

    def _rows(self, model: type[SQLModel], run_id: str, *order: Any) -> list[Any]:
        with Session(self.engine) as s:
            return list(s.exec(select(model).where(model.run_id == run_id).order_by(*order)).all())

    def ticks(self, run_id: str) -> list[Tick]:
        return self._rows(Tick, run_id, Tick.tick)

    def steps(self, run_id: str) -> list[AgentStep]:
        return self._rows(AgentStep, run_id, AgentStep.tick, AgentStep.agent_id)

    def events(self, run_id: str, tick: Optional[int] = None) -> list[EventRow]:
        if tick is None:
            return self._rows(EventRow, run_id, EventRow.tick, EventRow.id)
        with Session(self.engine) as s:
            return list(s.exec(select(EventRow).where(EventRow.run_id == run_id, EventRow.tick == tick).order_by(EventRow.id)).all())

    def fallback_count(self, run_id: str) -> int:
        """Agent steps with a fallback decision (counted in SQL)."""
        with Session(self.engine) as s:
            return int(s.exec(select(func.count()).select_from(AgentStep).where(AgentStep.run_id == run_id,
                                                                                AgentStep.fallback == True)).one())  # noqa: E712

    def llm_calls(self, run_id: str) -> list[LLMCall]:
        return self._rows(LLMCall, run_id, LLMCall.tick, LLMCall.id)

    def cache_lookup(self, keys: Sequence[str]) -> dict[str, LLMCall]:
        """Original (non-hit) calls for these cache keys, first stored wins."""
        found: dict[str, LLMCall] = {}
        if not keys:
            return found
        with Session(self.engine) as s:
            for start in range(0, len(keys), 500):
                chunk = list(keys[start:start + 500])
                rows = s.exec(select(LLMCall).where(LLMCall.key.in_(chunk), LLMCall.cache_hit == False).order_by(LLMCall.id)).all()  # noqa: E712
                for row in rows:
                    found.setdefault(row.key, row)
        return found

    def count_runs(self) -> int:
        with Session(self.engine) as s:
            return s.exec(select(func.count()).select_from(Run)).one()


_LLM_DEFAULTS = {"tokens_in": 0, "tokens_out": 0, "latency_s": 0.0, "cache_hit": False, "fallback": False, "attempts": 1, "value": None}


def _call_row(call: dict[str, Any]) -> dict[str, Any]:
    """An llm_calls row with every column present (executemany needs the same keys in each row)."""
    return {**_LLM_DEFAULTS, **call}


def dumps(value: Any) -> str:
    """The store's JSON serializer: strict JSON (non-finite floats become null), compact.

    The fast path is one `json.dumps`; only data that it refuses (NaN/inf, odd keys or types)
    is cleaned recursively first.
    """
    try:
        return _ENCODER.encode(value)
    except (ValueError, TypeError):
        return _ENCODER.encode(_clean(value))


_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)


def _clean(value: Any) -> Any:
    """JSON-safe plain data: tuples to lists, non-finite floats to None, mapping keys to str."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_clean(v) for v in value]
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


