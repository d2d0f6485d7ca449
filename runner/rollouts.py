"""Rollout groups: a run forked at tick t into k continuations that differ only in their decision seeds.

Each rollout is a fork (`runner.resume`) whose spec carries `rollout = (index, t)`: its ticks up to
`t` are its parent's (replayed from the seeds and the cache, checked and copied), and after `t` every
decision draws the seeds of rollout `index` (`sim.core.rng.SeedStream`): the world's own randomness,
the config and everything else stay the parent's. The LLM cache answers every decision it has seen,
so a rollout group is made once and read back as often as wanted; the advantages a GRPO trainer needs
are computed from the stored rewards (`analysis.rollouts`).

Making a group is idempotent: a rollout already stored (the same spec: parent, branch tick, config, index) is
taken as it is when it ended, resumed when it was interrupted or failed, and made only when there is none, so a
group interrupted and made again holds k runs, one per index, not the interrupted ones besides.
"""

from __future__ import annotations

from typing import Optional

from runner.backends import make_backends
from runner.config import validate_config
from runner.data import DATA_KEY, check_data
from runner.execution import Progress, RunResult, execute
from runner.plans import Continuation
from runner.probing import refuse_probe_run
from runner.resume import fork_spec, resumable, resume_run
from scenarios.registry import get_scenario
from sim.contracts.backend import ReplayMode
from sim.core.errors import UsageError
from sim.core.spec import RunSpec
from sim.store.store import Store
from sim.store.tables import Run

MAX_ROLLOUTS = 1024
ENDED = ("finished", "collapsed")


def rollout_runs(store: Store, parent_id: str, at: int, k: int, sets: Optional[list[str]] = None, *,
                 progress: Optional[Progress] = None, on_done=None) -> list[RunResult]:
    """k rollouts of `parent_id` from tick `at` (each a fork with rollout seeds after `at`), made one after another;
    those already stored are taken (or resumed) instead of made again.

    `sets` changes the config after `at` as a fork's do (the same for every rollout, e.g. a shorter horizon).
    `on_done(index, result)` is called as each one ends. UsageError for a bad `k` or `at`, before anything is stored,
    or for a rollout another process is making now.
    """
    if not 1 <= k <= MAX_ROLLOUTS:
        raise UsageError(f"bad value for '-k': {k}; a rollout group has 1..{MAX_ROLLOUTS} runs")
    parent = store.get_run(parent_id)
    refuse_probe_run(parent, "fork")
    if parent.spec.get("rollout") is not None:
        raise UsageError(f"run {parent.id} is itself a rollout; make rollouts of its parent {parent.parent_id}")
    spec, schedule = fork_spec(store, parent, at, list(sets or []))
    cls = get_scenario(spec.scenario)
    check_data((parent.versions or {}).get(DATA_KEY), validate_config(cls.Config, parent.spec["config"]))
    made = stored_rollouts(store, parent.id, at)
    results = []
    for index in range(k):
        mine = spec.model_copy(update={"rollout": (index, at)})
        earlier = made.get(mine.digest())
        if earlier is not None and earlier.status in ENDED:
            result = _result_of(store, earlier)
        elif earlier is not None:
            why = resumable(earlier)
            if why:  # still being made by a live process
                raise UsageError(f"rollout {index} ({earlier.id}): {why}")
            result = resume_run(store, earlier.id, progress=progress)
        else:
            replay = ReplayMode()
            backends = make_backends(mine, cls, store, replay=replay)
            plan = Continuation(schedule=list(schedule), replay_until=at, source_id=parent.id, replay=replay,
                                fork_of=parent, branch_tick=at)
            result = execute(mine, store, plan, backends=backends, progress=progress)
        results.append(result)
        if on_done is not None:
            on_done(index, result)
    return results


def stored_rollouts(store: Store, parent_id: str, at: int) -> dict[str, Run]:
    """The rollouts of `parent_id` at tick `at` already stored, by spec digest: one run per spec, the one that ended
    if several did (an earlier group made twice), else the latest."""
    out: dict[str, Run] = {}
    for run in store.forks_of(parent_id, at):
        if (run.spec or {}).get("rollout") is None:
            continue
        digest = RunSpec.model_validate(run.spec).digest()
        kept = out.get(digest)
        if kept is None or kept.status not in ENDED:
            out[digest] = run
    return out


def _result_of(store: Store, run: Run) -> RunResult:
    """A stored run's result, as `execute` reported it when it ended."""
    return RunResult(run.id, run.spec["scenario"], run.status, run.ticks, dict(run.final_metrics or {}), run.reason,
                     run.duration_s or 0.0, store.fallback_count(run.id))
