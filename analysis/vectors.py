"""Each agent's reward vector over time (Sotopia's per-agent, per-dimension scores): the named components the reward
layer stored with every agent step (sim.reward.components), read through the store's own reading functions.

A step stores its non-zero components only, so a component an agent's step lacks is 0 at that tick (it is filled
in, not left out: a line of norm violations drops to 0, it does not skip the tick).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Optional

import pandas as pd

from sim.store.store import Store
from sim.store.tables import AgentStep

COLUMNS = ["tick", "agent_id", "component", "value"]


def reward_vectors(store: Store, run_id: str, agent_ids: Optional[Collection[int]] = None) -> pd.DataFrame:
    """tick, agent_id, component, value of these agents' reward vectors (every agent's with None), one row per
    component the run's steps have, zeros filled in; empty for a run stored before reward vectors."""
    wanted = None if agent_ids is None else {int(a) for a in agent_ids}
    rows: list[tuple[int, int, dict]] = []
    for chunk in store.iter_rows(AgentStep, run_id):
        for r in chunk:
            if (wanted is None or r.agent_id in wanted) and r.components is not None:
                rows.append((int(r.tick), int(r.agent_id), dict(r.components)))
    if not rows:
        return pd.DataFrame(columns=COLUMNS)
    names = sorted({k for _, _, c in rows for k in c})
    wide = pd.DataFrame([{"tick": t, "agent_id": a, **{k: float(c.get(k, 0.0) or 0.0) for k in names}} for t, a, c in rows])
    long = wide.melt(id_vars=["tick", "agent_id"], var_name="component", value_name="value")
    return long.sort_values(["agent_id", "component", "tick"], kind="stable").reset_index(drop=True)[COLUMNS]


def vector_totals(vectors: pd.DataFrame) -> pd.DataFrame:
    """Per agent, each component summed over the run (one column a component): the agents' score table."""
    if vectors.empty:
        return pd.DataFrame(columns=["agent_id"])
    return vectors.pivot_table(index="agent_id", columns="component", values="value", aggfunc="sum",
                               fill_value=0.0).reset_index().rename_axis(columns=None)
