"""Rollout groups: a run forked at tick t into k continuations that differ only in their decision seeds.

Each rollout is a fork (`sim.runner.resume`) whose spec carries `rollout = (index, t)`: its ticks up to
`t` are its parent's (replayed from the seeds and the cache, checked and copied), and after `t` every
decision draws the seeds of rollout `index` (`sim.core.rng.SeedStream`): the world's own randomness,
the config and everything else stay the parent's. The LLM cache answers every decision it has seen,
so a rollout group is made once and read back as often as wanted; the advantages a GRPO trainer needs
are computed from the stored rewards (`analysis.rollouts`).
"""

from __future__ import annotations

from typing import Optional

from scenarios.registry import get_scenario
from sim.core.backend import ReplayMode
from sim.core.errors import UsageError
from sim.runner.backends import make_backends
from sim.runner.data import DATA_KEY, check_data
from sim.runner.execution import Progress, RunResult, execute
from sim.runner.plans import Continuation
from sim.runner.probing import refuse_probe_run
from sim.runner.resume import fork_spec
from sim.runner.config import validate_config
from sim.store.store import Store

MAX_ROLLOUTS = 1024


def rollout_runs(store: Store, parent_id: str, at: int, k: int, sets: Optional[list[str]] = None, *,
                 progress: Optional[Progress] = None, on_done=None) -> list[RunResult]:
    """k rollouts of `parent_id` from tick `at` (each a fork with rollout seeds after `at`), made one after another.

    `sets` changes the config after `at` as a fork's do (the same for every rollout, e.g. a shorter horizon).
    `on_done(index, result)` is called as each one ends. UsageError for a bad `k` or `at`, before anything is stored.
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
    results = []
    for index in range(k):
        mine = spec.model_copy(update={"rollout": (index, at)})
        replay = ReplayMode()
        backends = make_backends(mine, cls, store, replay=replay)
        plan = Continuation(schedule=list(schedule), replay_until=at, source_id=parent.id, replay=replay,
                            fork_of=parent, branch_tick=at)
        result = execute(mine, store, plan, backends=backends, progress=progress)
        results.append(result)
        if on_done is not None:
            on_done(index, result)
    return results
