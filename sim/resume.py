"""Resume a crashed or failed run, and fork a run at a tick under a changed config.

Both re-execute the committed ticks before going live: the Mesa model's state (its RNG, the
world, the agents' memories) is not stored, so it is rebuilt by stepping the model again.
During that replay
- scripted decisions are recomputed (they are pure functions of the request and its seed);
- LLM decisions come from the cache only (the calls committed with each tick): no model is
  loaded and a miss stops the run, so a replayed tick can never silently differ;
- each replayed tick is checked against the stored one (metrics, state, every agent step and
  event) and is not stored again. The first difference fails the run, naming the tick.
Then the LLM backend goes live and the run continues, committing as usual.

A resume continues in the SAME run row (its origin is kept; status back to `running`, then
its final status). A fork is a new run (origin `fork`, `parent_id`, `branch_tick`) whose
ticks up to the branch are copies of its parent's; after the branch tick the scenario's
config object is swapped for the changed one.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import datetime, timedelta, timezone
from typing import Any, Optional

from sqlalchemy import select, text, update

from sim.config import RESERVED, _deep_merge, parse_sets, validate_config
from sim.contracts import RunSpec
from sim.errors import UsageError
from sim.model import SocietyModel, TickRecord
from sim.rewards import RewardLayer
from sim.runner import RunResult, execute, horizon, make_backends
from sim.store import AgentStep, EventRow, Run, Store, Tick, dumps

#: fields of every scenario that shape the world or the agents built at tick 0: a fork cannot change them
FIXED_BASE_FIELDS = frozenset({"population", "memory_window", "memory_summary_chars"})
#: a running run whose owner is on another host counts as stale once its heartbeat is this old
STALE_AFTER = timedelta(minutes=10)


class ReplayMismatch(RuntimeError):
    """A replayed tick differs from the stored one."""


def fixed_fields(cls: type[SocietyModel]) -> frozenset[str]:
    """Config fields that may not change mid-run: the base's and the scenario's `fixed_fields`."""
    return FIXED_BASE_FIELDS | frozenset(getattr(cls, "fixed_fields", ()))


def config_schedule(store: Store, run: Run) -> list[tuple[int, dict[str, Any]]]:
    """The configs a run used: [(0, first config), (branch tick, config after it), ...] along its fork lineage."""
    config = run.spec["config"]
    if run.origin != "fork" or run.parent_id is None:
        return [(0, config)]
    parent = store.get_run(run.parent_id)
    earlier = [(t, c) for t, c in config_schedule(store, parent) if t < (run.branch_tick or 0)]
    return earlier + [(run.branch_tick or 0, config)]


# ----- comparing a replayed tick with the stored one ------------------------------------------------
def _plain(value: Any) -> Any:
    """What the store would give back for `value` (JSON round trip)."""
    return json.loads(dumps(value))


def _stored_tick(store: Store, run_id: str, tick: int) -> dict[str, Any]:
    with store.engine.connect() as conn:
        t = conn.execute(select(Tick.__table__.c.metrics, Tick.__table__.c.state)
                         .where(Tick.__table__.c.run_id == run_id, Tick.__table__.c.tick == tick)).first()
        s = AgentStep.__table__.c
        steps = conn.execute(select(s.agent_id, s.action, s.payoff, s.reward, s.fallback, s.memory)
                             .where(s.run_id == run_id, s.tick == tick).order_by(s.agent_id)).all()
        e = EventRow.__table__.c
        events = conn.execute(select(e.kind, e.actor, e.target, e.data)
                              .where(e.run_id == run_id, e.tick == tick).order_by(e.id)).all()
    if t is None:
        return {}
    return {"metrics": t.metrics, "state": t.state,
            "steps": [[r.agent_id, r.action, r.payoff, r.reward, bool(r.fallback), r.memory] for r in steps],
            "events": [[r.kind, r.actor, r.target, r.data] for r in events]}


def _replayed_tick(record: TickRecord) -> dict[str, Any]:
    return _plain({"metrics": record.metrics, "state": record.state,
                   "steps": [[s.agent_id, s.action, s.payoff, s.reward, s.fallback, s.memory] for s in record.steps],
                   "events": [[e.kind, e.actor, e.target, e.data] for e in record.events]})


def diff_tick(stored: dict[str, Any], replayed: dict[str, Any]) -> Optional[str]:
    """None when equal; else which part differs first."""
    if not stored:
        return "not stored"
    for part in ("metrics", "state", "steps", "events"):
        if stored[part] != replayed[part]:
            if part == "steps":
                for a, b in zip(stored[part], replayed[part]):
                    if a != b:
                        return f"agent {a[0]}'s step differs (stored {a[1:5]}, replayed {b[1:5]})"
            return f"{part} differ"
    return None


# ----- the plan that execute() follows ------------------------------------------------------------------
class ReplayPlan:
    """Replays ticks 1..`replay_until` (checked against `source_id`'s stored ticks), then goes live.

    `schedule` lists the configs: the first is used from tick 1, each later (tick, config) is
    swapped in after that tick. A fork copies its parent's rows when its replay reaches the
    branch tick (`copy_from`).
    """

    def __init__(self, *, schedule: list[tuple[int, dict[str, Any]]], replay_until: int, source_id: str,
                 run: Optional[Run] = None, fork_of: Optional[Run] = None, branch_tick: Optional[int] = None,
                 sweep_id: Optional[str] = None) -> None:
        self.schedule = schedule
        self.replay_until = replay_until
        self.source_id = source_id
        self.run = run  # resume: the row to claim
        self.fork_of = fork_of
        self.branch_tick = branch_tick
        self.sweep_id = sweep_id
        self.earlier_duration = run.duration_s if run is not None else 0.0
        self.model: Optional[SocietyModel] = None
        self.backends: dict[str, Any] = {}
        self.store: Optional[Store] = None
        self.run_id = ""
        self.replayed = 0

    # execute() calls these four
    def open(self, store: Store, spec: RunSpec, versions: dict[str, str], backends: str) -> str:
        self.store = store
        if self.run is not None:
            self.run_id = claim(store, self.run)
        else:
            self.run_id = store.create_run(spec, versions, origin="fork", parent_id=self.fork_of.id,
                                           branch_tick=self.branch_tick, backends=backends, sweep_id=self.sweep_id)
        return self.run_id

    def first_config(self, config: Any) -> Any:
        return type(config).model_validate(self.schedule[0][1])

    def attach(self, model: SocietyModel, backends: dict[str, Any]) -> None:
        self.model, self.backends = model, backends
        if self.replay_until == 0:
            self._go_live()
        self._maybe_swap(0)

    def commit(self, record: TickRecord, calls: list[dict[str, Any]]) -> bool:
        """True: store this tick (live). False: a replayed tick, checked against the stored one."""
        tick = record.tick
        if tick > self.replay_until:
            self._maybe_swap(tick)
            return True
        problem = diff_tick(_stored_tick(self.store, self.source_id, tick), _replayed_tick(record))
        if problem:
            raise ReplayMismatch(f"replay of tick {tick} does not match the stored run {self.source_id}: {problem}")
        self.replayed = tick
        if self.fork_of is not None and tick == self.branch_tick:
            copy_ticks(self.store, self.fork_of.id, self.run_id, tick)
        if tick == self.replay_until:
            self._go_live()
        self._maybe_swap(tick)
        return False

    def _go_live(self) -> None:
        for b in self.backends.values():
            if hasattr(b, "cache_only"):
                b.cache_only = False

    def _maybe_swap(self, tick: int) -> None:
        for at, config in self.schedule[1:]:
            if at == tick:
                swap_config(self.model, config)


def swap_config(model: SocietyModel, data: dict[str, Any]) -> None:
    """Give a running model its new config (after a tick); the reward layer is rebuilt from it."""
    config = type(model.config).model_validate(data)
    model.config = config
    model.reward_layer = RewardLayer(config.reward_mode, config.lam, config.feedback)


def copy_ticks(store: Store, parent_id: str, fork_id: str, upto: int) -> None:
    """Copy a parent's ticks 1..upto (ticks, agent steps, events, LLM calls as cache hits) into a fork, at once."""
    p = {"parent": parent_id, "fork": fork_id, "upto": upto, "hit": True}
    calls = ("key, tick, agent_id, phase, backend, model_id, prompt, answer, value, tokens_in, tokens_out, "
             "latency_s, cache_hit, fallback, attempts")
    with store.engine.begin() as conn:
        conn.execute(text("INSERT INTO ticks (run_id, tick, metrics, state, duration_s) SELECT :fork, tick, metrics, "
                          "state, duration_s FROM ticks WHERE run_id = :parent AND tick <= :upto ORDER BY tick"), p)
        conn.execute(text("INSERT INTO agent_steps (run_id, tick, agent_id, backend, action, payoff, reward, fallback, "
                          "reason, memory) SELECT :fork, tick, agent_id, backend, action, payoff, reward, fallback, "
                          "reason, memory FROM agent_steps WHERE run_id = :parent AND tick <= :upto ORDER BY id"), p)
        conn.execute(text("INSERT INTO events (run_id, tick, kind, actor, target, data) SELECT :fork, tick, kind, "
                          "actor, target, data FROM events WHERE run_id = :parent AND tick <= :upto ORDER BY id"), p)
        conn.execute(text(f"INSERT INTO llm_calls (run_id, {calls}) SELECT :fork, "
                          f"{calls.replace('latency_s, cache_hit', '0.0, :hit')} FROM llm_calls "
                          "WHERE run_id = :parent AND tick <= :upto ORDER BY id"), p)
        conn.execute(update(Run.__table__).where(Run.__table__.c.id == fork_id).values(ticks=upto))


# ----- resume ------------------------------------------------------------------------------------------------
def owner_alive(run: Run, now: Optional[datetime] = None) -> bool:
    """Whether a `running` run's owner may still be at work: its process lives (same host) or its heartbeat is fresh."""
    if run.owner_host == socket.gethostname() and run.owner_pid:
        if run.owner_pid == os.getpid():
            return False
        try:
            os.kill(run.owner_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return not _zombie(run.owner_pid)
    beat = run.heartbeat_at
    if beat is None:
        return False
    if beat.tzinfo is None:
        beat = beat.replace(tzinfo=timezone.utc)
    return (now or datetime.now(timezone.utc)) - beat < STALE_AFTER


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def resumable(run: Run) -> Optional[str]:
    """None if `run` can be resumed now; else why not (one line)."""
    if run.status in ("finished", "collapsed"):
        return f"run {run.id} is {run.status}: nothing to resume (`societas fork` branches a finished run)"
    if run.status == "running" and owner_alive(run):
        return (f"run {run.id} is still running (pid {run.owner_pid} on {run.owner_host}, last tick at "
                f"{run.heartbeat_at}); resume it once that process is gone, or pass --force")
    return None


def claim(store: Store, run: Run) -> str:
    """Take over a run row atomically (compare-and-set on its status and owner): status back to running, owned by us."""
    c = Run.__table__.c
    with store.engine.begin() as conn:
        result = conn.execute(
            update(Run.__table__)
            .where(c.id == run.id, c.status == run.status,
                   c.owner_pid.is_(None) if run.owner_pid is None else c.owner_pid == run.owner_pid,
                   c.heartbeat_at.is_(None) if run.heartbeat_at is None else c.heartbeat_at == run.heartbeat_at)
            .values(status="running", reason=None, finished_at=None, owner_pid=os.getpid(),
                    owner_host=socket.gethostname(), heartbeat_at=datetime.now(timezone.utc)))
    if result.rowcount != 1:
        raise UsageError(f"run {run.id} was taken over by another process meanwhile; see `societas show {run.id}`")
    return run.id


def resume_run(store: Store, run_id: str, *, force: bool = False, progress: Any = None,
               backend_hook: Any = None) -> RunResult:
    """Continue an unfinished run in its own row; raises UsageError if it cannot be resumed, RunFailed if it fails."""
    from scenarios import get_scenario

    run = store.get_run(run_id)
    why = resumable(run)
    if why and not (force and run.status == "running"):
        raise UsageError(why)
    spec = RunSpec.model_validate(run.spec)
    cls = get_scenario(spec.scenario)
    with store.engine.connect() as conn:
        stored = conn.execute(text("SELECT count(*), coalesce(max(tick), 0) FROM ticks WHERE run_id = :r"),
                              {"r": run.id}).one()
    if stored[0] != stored[1] or stored[1] != run.ticks:
        raise UsageError(f"run {run.id}'s stored ticks are not 1..{run.ticks} (found {stored[0]} up to {stored[1]}); "
                         "it cannot be resumed")
    backends = make_backends(spec, cls, store, cache_only=True)
    if backend_hook is not None:
        backend_hook(backends)
    plan = ReplayPlan(schedule=config_schedule(store, run), replay_until=run.ticks, source_id=run.id, run=run)
    return execute(spec, store, progress=progress, backends=backends, plan=plan)


# ----- fork -------------------------------------------------------------------------------------------------------
def fork_spec(store: Store, parent: Run, at: int, sets: list[str]) -> tuple[RunSpec, list[tuple[int, dict[str, Any]]]]:
    """The fork's spec (the parent's with `sets` applied) and its config schedule; UsageError naming what is refused."""
    from scenarios import get_scenario

    spec = RunSpec.model_validate(parent.spec)
    cls = get_scenario(spec.scenario)
    changes = parse_sets(sets)
    for key in changes:
        if key in RESERVED:
            raise UsageError(f"--set {key}: a fork keeps its parent's {key}; only config fields may change")
    config = validate_config(cls.Config, _deep_merge(spec.config, changes)).model_dump(mode="json")
    changed = sorted(k for k in config if config[k] != spec.config.get(k))
    fixed = fixed_fields(cls)
    refused = [k for k in changed if k in fixed]
    if refused:
        may = ", ".join(sorted(k for k in cls.Config.model_fields if k not in fixed))
        raise UsageError(f"field {refused[0]!r} cannot change mid-run (it shapes the world or the agents built at the "
                         f"start); fields that may change in a fork: {may}")
    if not 0 <= at <= parent.ticks:
        raise UsageError(f"bad value for '--at': {at}; run {parent.id} has committed ticks 1..{parent.ticks} (use 0..{parent.ticks})")
    if parent.status == "collapsed" and at == parent.ticks:
        raise UsageError(f"run {parent.id} ended ({parent.status}) at tick {at}: fork at an earlier tick")
    new = spec.model_copy(update={"config": config})
    if horizon(new, cls) <= at:
        raise UsageError(f"bad value for {cls.horizon_field!r}: the fork must run past tick {at} (got {horizon(new, cls)})")
    schedule = [(t, c) for t, c in config_schedule(store, parent) if t < at] + [(at, config)]
    return new, schedule


def fork_run(store: Store, parent_id: str, at: int, sets: list[str], *, progress: Any = None,
             backend_hook: Any = None) -> RunResult:
    """A new run identical to `parent_id` up to tick `at` (replayed, checked, copied), then under the changed config."""
    from scenarios import get_scenario

    parent = store.get_run(parent_id)
    spec, schedule = fork_spec(store, parent, at, sets)
    backends = make_backends(spec, get_scenario(spec.scenario), store, cache_only=True)
    if backend_hook is not None:
        backend_hook(backends)
    plan = ReplayPlan(schedule=schedule, replay_until=at, source_id=parent.id, fork_of=parent, branch_tick=at)
    return execute(spec, store, progress=progress, backends=backends, plan=plan)
