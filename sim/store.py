"""The run store: SQLModel tables and the `Store` that writes one transaction per tick.

SQLite by default; any SQLAlchemy URL works (PostgreSQL with `postgresql+psycopg://...`).
All table models live here, beside the engine factory.
"""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import JSON, Column, Text, event, func
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, OperationalError, SQLAlchemyError
from sqlmodel import Field, Session, SQLModel, create_engine, select

from sim.errors import UsageError
from sim.model import TickRecord

RUN_STATUSES = ("running", "finished", "failed", "collapsed")


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
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
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
    id: Optional[int] = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="runs.id", index=True)
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


def make_engine(url: str) -> Engine:
    """An engine for `url`, with the schema created; a UsageError if it cannot be opened."""
    try:
        kwargs: dict[str, Any] = {}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"check_same_thread": False, "timeout": 30}
        engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(engine, "connect", _sqlite_pragmas)
        migrate(engine)
        return engine
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise UsageError(f"cannot open database {url!r}: {str(exc).splitlines()[0]}") from None
    except (OperationalError, SQLAlchemyError) as exc:
        raise UsageError(f"cannot open database {url!r}: {str(getattr(exc, 'orig', exc)).splitlines()[0]}") from None


MIGRATIONS = Path(__file__).with_name("migrations")


def migrate(engine: Engine) -> None:
    """Bring the schema to the newest Alembic revision (creates it in an empty database)."""
    from alembic import command
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.close()


class Store:
    """Reads and writes runs; every tick is committed in one transaction."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.engine = make_engine(url)

    # ----- writing ----------------------------------------------------------------------
    def create_run(self, spec: Any, versions: dict[str, str]) -> str:
        run_id = uuid.uuid4().hex[:12]
        with Session(self.engine) as s:
            s.add(Run(id=run_id, scenario=spec.scenario, seed=spec.seed, policy=spec.policy,
                      spec_digest=spec.digest(), spec=spec.model_dump(mode="json"), versions=versions))
            s.commit()
        return run_id

    def record_tick(self, run_id: str, record: TickRecord, llm_calls: Iterable[dict[str, Any]] = (), duration_s: float = 0.0) -> None:
        """Commit a tick, its agent steps, events and LLM calls, and the run's progress, at once."""
        with Session(self.engine) as s:
            s.add(Tick(run_id=run_id, tick=record.tick, metrics=_clean(record.metrics), state=_clean(record.state), duration_s=duration_s))
            for st in record.steps:
                s.add(AgentStep(run_id=run_id, tick=record.tick, agent_id=st.agent_id, backend=st.backend,
                                action=_clean(st.action), payoff=st.payoff, reward=st.reward, fallback=st.fallback,
                                reason=st.reason, memory=_clean(st.memory)))
            for ev in record.events:
                s.add(EventRow(run_id=run_id, tick=record.tick, kind=ev.kind, actor=ev.actor, target=ev.target, data=_clean(ev.data)))
            for call in llm_calls:
                s.add(LLMCall(run_id=run_id, **call))
            run = s.get(Run, run_id)
            run.ticks = record.tick
            s.add(run)
            s.commit()

    def finish_run(self, run_id: str, status: str, reason: Optional[str], duration_s: float,
                   final_metrics: Optional[dict[str, Any]] = None) -> None:
        """Close a run: its status, reason and the final summary (whole-run metrics)."""
        if status not in RUN_STATUSES:
            raise ValueError(f"bad status {status!r}")
        with Session(self.engine) as s:
            run = s.get(Run, run_id)
            run.status, run.reason, run.finished_at, run.duration_s = status, reason, _now(), duration_s
            if final_metrics is not None:
                run.final_metrics = _clean(final_metrics)
            s.add(run)
            s.commit()

    def delete_run(self, run_id: str) -> bool:
        """Delete a run and all its rows (ticks, agent steps, events, LLM calls) in one transaction.

        Returns False when no run has this exact id (nothing is deleted).
        """
        from sqlalchemy import delete

        with Session(self.engine) as s:
            if s.get(Run, run_id) is None:
                return False
            for model in (Tick, AgentStep, EventRow, LLMCall):
                s.exec(delete(model).where(model.run_id == run_id))
            s.exec(delete(Run).where(Run.id == run_id))
            s.commit()
        return True

    # ----- reading ---------------------------------------------------------------------------
    def get_run(self, run_id: str) -> Run:
        """A run by id or unique id prefix; a UsageError naming the problem otherwise."""
        with Session(self.engine) as s:
            run = s.get(Run, run_id)
            if run is None and run_id:
                matches = s.exec(select(Run).where(Run.id.startswith(run_id))).all()
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

    def events(self, run_id: str) -> list[EventRow]:
        return self._rows(EventRow, run_id, EventRow.tick, EventRow.id)

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


