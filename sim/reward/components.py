"""Reward components: each agent's tick as a vector of named parts, and a run's reward as their weighting.

A scenario says what it pays (`payoffs()`, the material payoff) and may add components of its own
(`SocietyModel.reward_components`: the fishery's catch and stock change, the feed's upvotes...).
The components every scenario shares are computed here, once for all:

- `payoff`: the material payoff (always present);
- `welfare`: the mean payoff of the agents paid this tick (the same for all of them);
- `envy` and `guilt`: Fehr and Schmidt's (1999) disadvantageous and advantageous inequity,
  (1/(n-1)) sum_j max(p_j - p_i, 0) and (1/(n-1)) sum_j max(p_i - p_j, 0): inequity aversion with
  parameters alpha and beta is `reward_weights: {payoff: 1, envy: -alpha, guilt: -beta}`;
- `norm_kept`, `norm_broken`: the norm compliances and violations the agent was recorded for;
- `fined`: fines the agent received from sanctions; `sanction_cost`: what it paid to sanction.

A run's reward is `sum_c weights[c] * component_c` per agent (`reward_weights`, default
`{payoff: 1}`), then the reward mode (private, integrated, cooperative) over those sums.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Optional

import numpy as np

from sim.core.contracts import Event

#: the components every scenario has: name -> what it is
COMMON_COMPONENTS: dict[str, str] = {
    "payoff": "the material payoff of the tick (what the scenario pays; Perolat's metrics are over it)",
    "welfare": "the mean payoff of the agents paid this tick (the same value for each of them)",
    "envy": "Fehr-Schmidt disadvantageous inequity: (1/(n-1)) x the sum over others of max(their payoff - mine, 0)",
    "guilt": "Fehr-Schmidt advantageous inequity: (1/(n-1)) x the sum over others of max(mine - their payoff, 0)",
    "norm_kept": "norm compliances recorded for the agent this tick (the norm ledger)",
    "norm_broken": "norm violations recorded for the agent this tick",
    "fined": "fines the agent received from sanctions this tick",
    "sanction_cost": "what the agent paid this tick to sanction others",
}

#: the default weighting: the reward is the material payoff, as before components existed
DEFAULT_WEIGHTS: dict[str, float] = {"payoff": 1.0}

Components = dict[str, dict[int, float]]


def inequity(payoffs: Mapping[int, float]) -> tuple[dict[int, float], dict[int, float]]:
    """(envy, guilt) per agent: Fehr-Schmidt's two inequity terms, in O(n log n) from sorted prefix sums."""
    ids = list(payoffs)
    n = len(ids)
    if n < 2:
        return dict.fromkeys(ids, 0.0), dict.fromkeys(ids, 0.0)
    x = np.fromiter(payoffs.values(), dtype=np.float64, count=n)
    order = np.sort(x)
    prefix = np.concatenate(([0.0], np.cumsum(order)))
    below = np.searchsorted(order, x, side="left")  # others strictly below (ties contribute 0 either way)
    above = np.searchsorted(order, x, side="right")
    total = prefix[-1]
    envy = ((total - prefix[above]) - (n - above) * x) / (n - 1)
    guilt = (below * x - prefix[below]) / (n - 1)
    return dict(zip(ids, np.maximum(envy, 0.0).tolist())), dict(zip(ids, np.maximum(guilt, 0.0).tolist()))


def common_components(payoffs: Mapping[int, float], norm_events: Iterable[Event]) -> Components:
    """The shared components of one tick, from its payoffs and the norm ledger's events."""
    out: Components = {"payoff": {i: float(p) for i, p in payoffs.items()}}
    if payoffs:
        mean = float(sum(payoffs.values())) / len(payoffs)
        out["welfare"] = dict.fromkeys(payoffs, mean)
        out["envy"], out["guilt"] = inequity(payoffs)
    kept: dict[int, float] = {}
    broken: dict[int, float] = {}
    fined: dict[int, float] = {}
    cost: dict[int, float] = {}
    for e in norm_events:
        if e.kind == "norm.compliance" and e.actor is not None:
            kept[e.actor] = kept.get(e.actor, 0.0) + 1.0
        elif e.kind == "norm.violation" and e.actor is not None:
            broken[e.actor] = broken.get(e.actor, 0.0) + 1.0
        elif e.kind == "norm.sanction":
            if e.target is not None:
                fined[e.target] = fined.get(e.target, 0.0) + float(e.data.get("fine", 0.0))
            if e.actor is not None:
                cost[e.actor] = cost.get(e.actor, 0.0) + float(e.data.get("cost", 0.0))
    out.update(norm_kept=kept, norm_broken=broken, fined=fined, sanction_cost=cost)
    return out


def nonzero(ids: Sequence[int], columns: Iterable[tuple[str, np.ndarray]]) -> Components:
    """Components from per-agent numpy columns (aligned with `ids`), each keeping its non-zero entries only."""
    return {name: {int(ids[i]): float(values[i]) for i in np.flatnonzero(values)} for name, values in columns}


def weigh(components: Mapping[str, Mapping[int, float]], weights: Mapping[str, float],
          ids: Iterable[int]) -> dict[int, float]:
    """Each agent's weighted sum of components (a component an agent lacks counts 0). With the default weights
    ({payoff: 1}) this is the payoff itself, bit for bit."""
    out = {}
    terms = [(components.get(name, {}), float(w)) for name, w in weights.items()]
    for i in ids:
        total = 0.0
        for values, w in terms:
            v = values.get(i)
            if v:
                total += w * v
        out[i] = total
    return out


def vectors(components: Mapping[str, Mapping[int, float]], ids: Sequence[int]) -> list[Optional[dict[str, float]]]:
    """Each agent's reward vector as stored: its non-zero components by name (a zero is left out; payoff always in)."""
    names = [n for n in components if components[n]]
    out: list[Optional[dict[str, float]]] = []
    for i in ids:
        vec = {}
        for n in names:
            v = components[n].get(i)
            if v or n == "payoff":
                vec[n] = float(v or 0.0)
        out.append(vec)
    return out


def unknown_weights(weights: Mapping[str, float], own: Iterable[str]) -> list[str]:
    """The weight names that are neither a common component nor one of the scenario's own (`own`)."""
    known = set(COMMON_COMPONENTS) | set(own)
    return sorted(set(weights) - known)
