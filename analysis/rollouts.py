"""Group-relative advantages of a rollout group, straight from the store: the shape GRPO needs.

For each rollout j of a group forked at tick t and each agent a, the return is
R_ja = sum over ticks > t of a's stored reward (the reward layer's scalar: weights, then mode), and
the advantage is A_ja = (R_ja - mean_j R_ja) / (std_j R_ja + eps) (GRPO's normalisation; the
population std). Over the rollouts of one agent the advantages sum to 0 (the mean is taken out).
The group's advantage of a rollout is the same over the mean return of its agents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from runner.rollouts import stored_rollouts
from sim.core.errors import UsageError
from sim.store.store import Store
from sim.store.tables import AgentStep

EPS = 1e-8


def returns_after(store: Store, run_id: str, after: int) -> dict[int, float]:
    """Each agent's summed stored reward over the run's ticks after `after`."""
    out: dict[int, float] = {}
    for rows in store.iter_rows(AgentStep, run_id):
        for r in rows:
            if r.tick > after:
                out[r.agent_id] = out.get(r.agent_id, 0.0) + float(r.reward)
            else:
                out.setdefault(r.agent_id, 0.0)
    return out


def normalised(values: Sequence[float]) -> list[float]:
    """(x - mean) / (std + eps): zero-sum over the group (all zeros when the group does not vary)."""
    x = np.asarray(values, dtype=np.float64)
    centred = x - x.mean()
    return (centred / (x.std() + EPS)).tolist()


def advantages(store: Store, run_ids: Sequence[str], after: int) -> dict[str, Any]:
    """The advantages of a rollout group: {"after", "runs": [{run_id, rollout, return, advantage}],
    "agents": [{run_id, rollout, agent_id, return, advantage}]}; UsageError when the runs are not one group."""
    if not run_ids:
        raise UsageError("a rollout group needs at least one run")
    runs = [store.get_run(r) for r in run_ids]
    parents = {r.parent_id for r in runs}
    if len(parents) != 1 or any(r.branch_tick != after for r in runs):
        raise UsageError("the runs are not one rollout group (one parent, one branch tick)")
    per_run = [returns_after(store, r.id, after) for r in runs]
    agents = sorted(set().union(*per_run))
    rows = []
    for a in agents:
        got = [ret.get(a, 0.0) for ret in per_run]
        for run, ret, adv in zip(runs, got, normalised(got)):
            rows.append({"run_id": run.id, "rollout": (run.spec.get("rollout") or [None])[0], "agent_id": a,
                         "return": ret, "advantage": adv})
    means = [float(np.mean(list(ret.values()))) if ret else 0.0 for ret in per_run]
    group = [{"run_id": run.id, "rollout": (run.spec.get("rollout") or [None])[0], "return": m, "advantage": adv}
             for run, m, adv in zip(runs, means, normalised(means))]
    return {"parent_id": parents.pop(), "after": after, "runs": group, "agents": rows}


def advantage_frame(report: dict[str, Any]) -> pd.DataFrame:
    """The per-agent advantages as a DataFrame (one row per rollout x agent)."""
    return pd.DataFrame(report["agents"], columns=["run_id", "rollout", "agent_id", "return", "advantage"])


def rollout_group(store: Store, parent_id: str, after: int) -> list[str]:
    """The ids of the stored rollout group of `parent_id` forked at `after` (the group of the rollout made last, when
    several configs were rolled out there), one run per rollout index, in index order."""
    made = stored_rollouts(store, parent_id, after)
    if not made:
        return []
    config = max(made.values(), key=lambda r: r.created_at).spec["config"]
    group = [r for r in made.values() if r.spec["config"] == config]
    return [r.id for r in sorted(group, key=lambda r: r.spec["rollout"][0])]
