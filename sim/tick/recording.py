"""What a tick hands the store of its agents: their steps, in columns (sim.core.records.StepColumns).

For the agents present after the tick, by id: each phase's decisions, the payoff, the reward and the reward
vectors (in columns), the fallbacks with their reasons, and each memory snapshot that changed since it was
last stored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from operator import attrgetter
from typing import Optional

from sim.core.contracts import Decision, DecisionColumns, values_by_agent
from sim.contracts.memory import Memory
from sim.core.records import StepColumns
from sim.reward.components import RewardColumns
from sim.tick.roster import Roster

_backend = attrgetter("backend")


def step_columns(roster: Roster, taken: Sequence[tuple[str, Sequence[Decision]]], payoffs: Mapping[int, float],
                 rewards: Mapping[int, float], components: Optional[RewardColumns]) -> tuple[StepColumns, int]:
    """(the tick's agent steps, how many of the agents present fell back to a default in some phase).

    The agents are those of `roster` (the model's, after the tick), sorted by id; `taken` each phase's decisions
    in request order. Marks every changed memory as stored.
    """
    agents, present = roster.by_id()
    ids, id_array = roster.ids()
    fell: dict[int, list[str]] = {}
    for _, decided in taken:
        for d in decided.fallbacks() if isinstance(decided, DecisionColumns) else [d for d in decided if d.fallback]:
            if d.agent_id in present:
                fell.setdefault(d.agent_id, []).append(f"{d.phase}: {d.reason}")
    memories = {}
    mark = (roster.changes, Memory.changes)
    if getattr(roster, "memories_stored_at", None) != mark:  # (no memory changed and no agent came since: none to store)
        for agent in [a for a in agents if a.memory.version != a.stored_memory_version]:
            memories[agent.unique_id] = agent.memory.snapshot()
            agent.stored_memory_version = agent.memory.version
        roster.memories_stored_at = (roster.changes, Memory.changes)
    if len(payoffs) == len(ids) and len(rewards) == len(ids) and list(payoffs) == ids and list(rewards) == ids:
        paid, got = list(payoffs.values()), list(rewards.values())  # (the usual tick: every agent present paid, in order)
    else:
        paid, got = list(map(payoffs.get, ids, repeat(0.0))), list(map(rewards.get, ids, repeat(0.0)))
    steps = StepColumns(
        ids, list(map(_backend, agents)), paid, got, [(phase, values_by_agent(decided)) for phase, decided in taken],
        {aid: "; ".join(reasons) for aid, reasons in fell.items()}, memories,
        None if components is None else components.vectors(ids, id_array),
    )
    return steps, len(fell)
