"""Every table of the store, as SQLModel models (the schema itself is made by the migrations in ./migrations).

runs (one row per run: spec, status, timings, final metrics, lineage, owner), sweeps, ticks (metrics
and world state), agent_steps (each agent's actions, payoff, reward, fallback, memory), reward_vectors
(each tick's reward vectors, packed), events and llm_calls (the cache: prompt, answer, tokens).
`tests/test_store.py` checks the models and the migrations agree.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Optional

from sqlalchemy import JSON, Column, Index, LargeBinary, Text
from sqlmodel import Field, SQLModel

RUN_STATUSES = ("running", "finished", "failed", "collapsed", "stopped")  # stopped: ended on request before its horizon


def utc_now() -> datetime:
    """Now, in UTC (every timestamp of the store)."""
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
    created_at: datetime = Field(default_factory=utc_now)
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
    # what the run starts from that its events do not carry (SocietyModel.initial_state); NULL before 0005
    initial: Optional[dict] = Field(default=None, sa_column=Column(JSON))


class RunAgent(SQLModel, table=True):
    """An agent that took part in a run: who it is (SocietyModel.agent_profile) and the tick it joined (0: at the
    start). Written as agents join, so a run that gains agents (the donor game's generations) lists them all."""

    __tablename__ = "run_agents"
    __table_args__ = {"sqlite_with_rowid": False}  # (SQLite: rows kept in the key's order, no second index; since 0006)
    run_id: str = Field(foreign_key="runs.id", primary_key=True)
    agent_id: int = Field(primary_key=True)
    joined: int
    role: str
    policy: Optional[str] = None
    strategy: Optional[str] = None
    persona: Optional[str] = Field(default=None, sa_column=Column(Text))
    profile: dict = Field(default_factory=dict, sa_column=Column(JSON))


class SweepRow(SQLModel, table=True):
    """A sweep: its definition (scenario, base, grid, seeds, policy), how many runs it has, where it came from."""

    __tablename__ = "sweeps"
    id: str = Field(primary_key=True)
    scenario: str
    definition: dict = Field(default_factory=dict, sa_column=Column(JSON))
    total: int
    source: Optional[str] = None  # the sweep file it was read from
    created_at: datetime = Field(default_factory=utc_now)
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
    # the reward vector: named components (sim.reward.components), non-zero ones only. Written here by runs stored
    # before 0006 (NULL before contract 7); since then a tick's vectors are packed in `reward_vectors`, and the store
    # reads them back into this field (sim.store.store), so every reader sees them here
    components: Optional[dict] = Field(default=None, sa_column=Column(JSON))


class RewardVectorsRow(SQLModel, table=True):
    """A tick's reward vectors, every agent step's in one packed binary value (sim.store.vectors); since 0006."""

    __tablename__ = "reward_vectors"
    run_id: str = Field(foreign_key="runs.id", primary_key=True)
    tick: int = Field(primary_key=True)
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))


class EventRow(SQLModel, table=True):
    """Messages, harvests, sanctions, norm events, trades."""

    __tablename__ = "events"
    __table_args__ = (Index("ix_events_run_id_tick", "run_id", "tick"), Index("ix_events_run_id_kind", "run_id", "kind"))
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
    # the completion as tokens, for training (`export --format trajectories`): its token ids and each one's
    # log-probability under the model; NULL when the backend does not give them (a served model, a fake one)
    completion_ids: Optional[list] = Field(default=None, sa_column=Column(JSON))
    logprobs: Optional[list] = Field(default=None, sa_column=Column(JSON))
