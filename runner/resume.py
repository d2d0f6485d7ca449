"""Resume a crashed or failed run, and fork a run at a tick under a changed config.

Both re-execute the committed ticks before going live (see `runner.plans.Continuation`): a
resume continues in the SAME run row (its origin is kept; status back to `running`, then its final
status); a fork is a new run (origin `fork`, `parent_id`, `branch_tick`) whose ticks up to the
branch are copies of its parent's, and whose config is swapped for the changed one after it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from typing import Any, Optional

from agents.llm.base import LLM
from runner.backends import make_backends
from runner.config import RESERVED, deep_merge, parse_sets, validate_config
from runner.data import DATA_KEY, check_data
from runner.execution import Progress, RunResult, execute, horizon
from runner.plans import Continuation, Schedule, config_schedule
from runner.probing import refuse_probe_run
from scenarios.registry import get_scenario
from sim.contracts.backend import ReplayMode
from sim.core.errors import UsageError
from sim.core.spec import LLMSpec, RunSpec
from sim.store.liveness import owner_alive
from sim.store.store import Store
from sim.store.tables import Run
from sim.tick.model import SocietyModel

#: fields of every scenario a fork may change: the reward layer is rebuilt from them after the branch tick
BASE_FORK_FIELDS = frozenset({"reward_mode", "lam", "feedback", "reward_weights"})


def fork_fields(cls: type[SocietyModel]) -> frozenset[str]:
    """Config fields a fork may change mid-run: the reward layer's, the horizon (and the fields that bound it), and the
    scenario's `fork_fields` (some of them only where their `fork_conditions` hold: `unread_change`)."""
    return BASE_FORK_FIELDS | {cls.horizon_field} | frozenset(cls.fork_fields) | frozenset(cls.horizon_bounds)


def unread_change(cls: type[SocietyModel], field: str, config: Mapping[str, Any], policy: str,
                  changed: Collection[str] = ()) -> Optional[str]:
    """Why changing `field` in a fork whose config (after the change) is `config` (the run's `policy`) would change
    nothing the world reads after the branch; None when it changes something (`SocietyModel.fork_conditions`)."""
    horizon = cls.horizon_field
    if field in cls.horizon_bounds and field not in cls.fork_fields and horizon not in changed:
        return f"field {field!r} only bounds the horizon once the world is built: change {horizon!r} with it"
    conditions = cls.fork_conditions.get(field)
    if not conditions or (field in cls.horizon_bounds and horizon in changed):
        return None
    plays = _who_plays(cls, config, policy)
    if any(all(_holds(key, want, config, plays) for key, want in c.items()) for c in conditions):
        return None
    when = " or ".join(" and ".join(_condition_text(key, want) for key, want in c.items()) for c in conditions)
    return (f"field {field!r} would change nothing after the branch: {cls.name or cls.__qualname__} reads it only {when}"
            " (change that too, or leave it)")


def _who_plays(cls: type[SocietyModel], config: Mapping[str, Any], policy: str) -> dict[str, frozenset[str]]:
    """The policies the run's agents play and the strategies its scripted agents play."""
    groups = config.get("population") or [{}]
    default = config.get("strategy", cls.default_strategy)
    roles = [((g.get("policy") or policy), g.get("strategy") or default) for g in groups]
    return {"@policy": frozenset(p for p, _ in roles), "@strategy": frozenset(s for p, s in roles if p == "scripted")}


def _holds(key: str, want: Any, config: Mapping[str, Any], plays: Mapping[str, frozenset[str]]) -> bool:
    wanted = want if isinstance(want, tuple) else (want,)
    if key in plays:
        return bool(plays[key] & set(wanted))
    return config.get(key) in wanted


def _condition_text(key: str, want: Any) -> str:
    shown = "|".join(map(_yaml, want)) if isinstance(want, tuple) else _yaml(want)
    if key == "@policy":
        return f"when some agents play {shown}"
    if key == "@strategy":
        return f"when some scripted agents play {shown}"
    return f"with {key}={shown}"


def _yaml(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


# ----- engine replicas -------------------------------------------------------------------------------------------
def on_replicas(spec: RunSpec, replicas: Optional[int]) -> RunSpec:
    """`spec` with its local model's decisions on `replicas` engine replicas (`--replicas`; None: as stored). The
    answers do not depend on the count, so a run made on N replicas goes on on any; a UsageError for a bad count or a
    run without LLM agents."""
    if replicas is None:
        return spec
    if not spec.uses_llm:  # as `run` refuses it: a run without LLM agents would store replicas it never starts
        raise UsageError("--replicas only applies to LLM agents, and this run has none")
    if not 1 <= replicas <= 1024:
        raise UsageError(f"bad value for 'llm.replicas': {replicas}; from 1 to 1024 engine replicas")
    llm = LLMSpec.model_validate({**spec.llm.model_dump(mode="json"), "replicas": replicas})
    return spec.model_copy(update={"llm": llm})


# ----- resume ------------------------------------------------------------------------------------------------
def resumable(run: Run) -> Optional[str]:
    """None if `run` can be resumed now; else why not (one line)."""
    if run.status in ("finished", "collapsed"):
        return f"run {run.id} is {run.status}: nothing to resume (`societas fork` branches a finished run)"
    if run.status == "running" and owner_alive(run):
        return (f"run {run.id} is still running (pid {run.owner_pid} on {run.owner_host}, last tick at "
                f"{run.heartbeat_at}); resume it once that process is gone, or pass --force")
    return None


def resume_spec(run: Run, *, force: bool = False, replicas: Optional[int] = None) -> RunSpec:
    """The spec a resume runs `run`'s live part under: the stored one, on `replicas` engine replicas where given; a
    UsageError if the run cannot be resumed (`resumable`; a probe's run). A run made by the local model in its process
    is refused replicas: a pool's calls are its shards, whose answers are not the in-process engine's
    (agents.llm.pool), so the resumed run would not be the run its spec makes."""
    refuse_probe_run(run, "resume")
    why = resumable(run)
    if why and not (force and run.status == "running"):
        raise UsageError(why)
    spec = RunSpec.model_validate(run.spec)
    if replicas is not None and spec.uses_llm and spec.llm.provider == "local" and not spec.llm.replicas:
        raise UsageError(f"run {run.id} was made by the local model in its process, not on engine replicas: its "
                         "answers on replicas would differ; resume it without --replicas (or fork it with them)")
    return on_replicas(spec, replicas)


def resume_run(store: Store, run_id: str, *, force: bool = False, progress: Optional[Progress] = None,
               llm_factory: Optional[Callable[[], LLM]] = None, replicas: Optional[int] = None) -> RunResult:
    """Continue an unfinished run in its own row; raises UsageError if it cannot be resumed, RunFailed if it fails.

    `llm_factory` supplies the LLM for the live part (a Ray sweep's shared model actor); `replicas`: the live part's
    engine replicas (`resume_spec`; the run row keeps the spec it was made with)."""
    run = store.get_run(run_id)
    live = resume_spec(run, force=force, replicas=replicas)
    spec = RunSpec.model_validate(run.spec)
    if spec.llm.provider == "env" and llm_factory is None:  # refused before the run is claimed: nothing changes
        raise UsageError(f"run {run.id} is an env episode: its LLM decisions were made by a policy outside, and none is "
                         f"here to make those after tick {run.ticks}; resume it with its policy: "
                         f"runner.resume.resume_run(store, {run.id!r}, llm_factory=POLICY) (docs/learning.md)")
    cls = get_scenario(spec.scenario)
    check_data((run.versions or {}).get(DATA_KEY), validate_config(cls.Config, run.spec["config"]))
    count, last = store.tick_range(run.id)
    if count != last or last != run.ticks:
        raise UsageError(f"run {run.id}'s stored ticks are not 1..{run.ticks} (found {count} up to {last}); "
                         "it cannot be resumed")
    replay = ReplayMode()
    backends = make_backends(live, cls, store, replay=replay, llm_factory=llm_factory)
    plan = Continuation(schedule=config_schedule(store, run), replay_until=run.ticks, source_id=run.id, replay=replay,
                        run=run)
    return execute(spec, store, plan, backends=backends, progress=progress)


# ----- fork -------------------------------------------------------------------------------------------------------
def fork_spec(store: Store, parent: Run, at: int, sets: list[str],
              replicas: Optional[int] = None) -> tuple[RunSpec, Schedule]:
    """The fork's spec (the parent's with `sets` applied, on `replicas` engine replicas where given: `on_replicas`)
    and its config schedule; UsageError naming what is refused."""
    spec = on_replicas(RunSpec.model_validate(parent.spec), replicas)
    cls = get_scenario(spec.scenario)
    changes = parse_sets(sets)
    if "ticks" in changes and "ticks" not in cls.Config.model_fields:  # as `run` takes it: the horizon
        changes[cls.horizon_field] = changes.pop("ticks")
    for key in changes:
        if key in RESERVED and key not in cls.Config.model_fields:
            raise UsageError(f"--set {key}: a fork keeps its parent's {key}; only config fields may change")
    config = validate_config(cls.Config, deep_merge(spec.config, changes)).model_dump(mode="json")
    changed = sorted(k for k in config if config[k] != spec.config.get(k))
    may = fork_fields(cls)
    refused = [k for k in changed if k not in may]
    if refused:
        raise UsageError(f"field {refused[0]!r} cannot change mid-run (it shapes the world or the agents built at the "
                         f"start); fields that may change in a fork of {cls.name or cls.__qualname__}: {', '.join(sorted(may))}")
    for k in changed:
        why = unread_change(cls, k, config, spec.policy, changed)
        if why:
            raise UsageError(why)
    if not 0 <= at <= parent.ticks:
        raise UsageError(f"bad value for '--at': {at}; run {parent.id} has committed ticks 1..{parent.ticks} (use 0..{parent.ticks})")
    if parent.status == "collapsed" and at == parent.ticks:
        raise UsageError(f"run {parent.id} ended ({parent.status}) at tick {at}: fork at an earlier tick")
    new = spec.model_copy(update={"config": config})
    if horizon(new, cls) <= at:
        raise UsageError(f"bad value for {cls.horizon_field!r}: the fork must run past tick {at} (got {horizon(new, cls)})")
    schedule = [(t, c) for t, c in config_schedule(store, parent) if t < at] + [(at, config)]
    return new, schedule


def fork_run(store: Store, parent_id: str, at: int, sets: list[str], *, progress: Optional[Progress] = None,
             replicas: Optional[int] = None) -> RunResult:
    """A new run identical to `parent_id` up to tick `at` (replayed, checked, copied), then under the changed config
    (its decisions on `replicas` engine replicas where given)."""
    parent = store.get_run(parent_id)
    refuse_probe_run(parent, "fork")
    spec, schedule = fork_spec(store, parent, at, sets, replicas)
    cls = get_scenario(spec.scenario)
    check_data((parent.versions or {}).get(DATA_KEY), validate_config(cls.Config, parent.spec["config"]))
    replay = ReplayMode()
    backends = make_backends(spec, cls, store, replay=replay)
    plan = Continuation(schedule=schedule, replay_until=at, source_id=parent.id, replay=replay, fork_of=parent,
                        branch_tick=at)
    return execute(spec, store, plan, backends=backends, progress=progress)
