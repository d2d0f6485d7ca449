"""Over-usage: how often each agent decided above the sustainable share of its tick, by the scenario's own rule.

A scenario that has such a rule names the phase (`usage_phase`) and the limit of a tick (`usage_limit(config,
state, acting)`); the counting is SQL in the store's queries (`sim.store.queries.over_usage`), so a run of a
million agent steps is never loaded whole.
"""

from __future__ import annotations

from typing import Any, Optional

import pandas as pd
from sqlalchemy.engine import Engine

from scenarios.registry import REGISTRY
from sim.store import queries


def over_usage(engine: Engine, run_id: str, scenario_name: str, config: dict[str, Any]) -> Optional[pd.DataFrame]:
    """Per agent: its decisions of the scenario's `usage_phase` and how many were above that tick's `usage_limit`
    (computed from the tick's stored state and the agents who acted); None when the scenario (a registered name)
    has no such limit."""
    scenario = REGISTRY.get(scenario_name)
    phase = getattr(scenario, "usage_phase", None)
    if not phase:
        return None
    return queries.over_usage(engine, run_id, phase, lambda state, acting: scenario.usage_limit(config, state, acting))
