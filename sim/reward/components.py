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

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Optional, Union

import numpy as np

from sim.core.contracts import Event
from sim.core.records import RewardVectors

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


@dataclass(frozen=True)
class Column:
    """A component's values for the agents `ids`, as aligned numpy arrays (or sequences): what a scenario that keeps
    its agents in columns hands over as it is, instead of a dict keyed by agent id."""

    ids: Sequence[int]
    values: Sequence[float]


#: one component of a tick: agent id -> value, or a Column (an agent left out has 0 of it)
Component = Union[Mapping[int, float], Column]


def inequity_columns(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(envy, guilt) of payoffs `x`, by position: Fehr-Schmidt's two inequity terms, in O(n log n) from sorted prefix
    sums (one sort; each payoff's count of others below and above it read off the sorted runs of equal values)."""
    n = len(x)
    if n < 2:
        return np.zeros(n), np.zeros(n)
    if n <= SMALL:
        few = x.tolist()
        if math.isfinite(sum(few)):  # (the array path orders NaNs its own way)
            return _inequity_few(few)
    order = np.argsort(x, kind="stable")
    ranked = x[order]
    prefix = np.concatenate(([0.0], np.cumsum(ranked)))
    first = np.empty(n, dtype=bool)  # where a run of equal payoffs starts (ties contribute 0 either way)
    first[0] = True
    np.not_equal(ranked[1:], ranked[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    run = np.cumsum(first) - 1
    below = np.empty(n, dtype=np.int64)  # others strictly below
    above = np.empty(n, dtype=np.int64)  # others at or below, itself included
    below[order] = starts[run]
    above[order] = np.append(starts[1:], n)[run]
    total = prefix[-1]
    envy = ((total - prefix[above]) - (n - above) * x) / (n - 1)
    guilt = (below * x - prefix[below]) / (n - 1)
    return np.maximum(envy, 0.0), np.maximum(guilt, 0.0)


#: up to this many payoffs, `inequity_columns` works on Python floats: numpy's fixed cost per call is most of a tick of
#: a handful of agents (the grid games')
SMALL = 32


def _inequity_few(x: list[float]) -> tuple[np.ndarray, np.ndarray]:
    """`inequity_columns` of a few payoffs, the same operations in the same order on the same floats (so the same
    bits): a stable sort, running sums from the first ranked value (as `np.cumsum`), runs of equal values, and
    `np.maximum(v, 0.0)` (which makes a -0.0 a 0.0) as `v if v > 0.0 else 0.0`."""
    n = len(x)
    order = sorted(range(n), key=x.__getitem__)
    prefix = [0.0, x[order[0]]]
    for i in order[1:]:
        prefix.append(prefix[-1] + x[i])
    below, above = [0] * n, [0] * n  # others strictly below; others at or below, itself included
    start = 0
    while start < n:
        end, value = start + 1, x[order[start]]
        while end < n and x[order[end]] == value:
            end += 1
        for k in order[start:end]:
            below[k], above[k] = start, end
        start = end
    total = prefix[n]
    envy = [((total - prefix[a]) - (n - a) * v) / (n - 1) for v, a in zip(x, above)]
    guilt = [(b * v - prefix[b]) / (n - 1) for v, b in zip(x, below)]
    return (np.array([v if v > 0.0 else 0.0 for v in envy], dtype=np.float64),
            np.array([v if v > 0.0 else 0.0 for v in guilt], dtype=np.float64))


def inequity(payoffs: Mapping[int, float]) -> tuple[dict[int, float], dict[int, float]]:
    """(envy, guilt) per agent: `inequity_columns` keyed by agent id."""
    ids = list(payoffs)
    envy, guilt = inequity_columns(np.fromiter(payoffs.values(), dtype=np.float64, count=len(ids)))
    return dict(zip(ids, envy.tolist())), dict(zip(ids, guilt.tolist()))


def norm_components(norm_events: Iterable[Event]) -> dict[str, dict[int, float]]:
    """The components the norm ledger's events give (compliances, violations, fines received, sanctions paid for),
    each with the agents it concerns only."""
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
    return {"norm_kept": kept, "norm_broken": broken, "fined": fined, "sanction_cost": cost}


class RewardColumns:
    """A tick's reward components over arrays: each one a float64 column over the agents `ids` (sorted, unique).

    `ids` are the agents present after the tick, and any agent paid this tick that is not; `paid` the positions of
    the payoffs' agents in `ids`, in the payoffs' order (the order rewards are computed in). A component an agent
    lacks is 0 for it, so the stored vectors (`vectors`: non-zero components, the payoff always) and the weighted
    sums (`weigh`) are those of the per-agent dicts the components once were, to the bit.
    """

    __slots__ = ("ids", "paid", "payoffs", "columns")

    def __init__(self, ids: np.ndarray, paid: Optional[np.ndarray], payoffs: Mapping[int, float]) -> None:
        """`paid`: None when the payoffs' agents are `ids` themselves, in order."""
        self.ids, self.paid, self.payoffs = ids, paid, payoffs
        self.columns: dict[str, np.ndarray] = {}

    @classmethod
    def of_tick(cls, present: np.ndarray, payoffs: Mapping[int, float], keys: np.ndarray, pay: np.ndarray,
                norm_events: Iterable[Event], own: Mapping[str, Component]) -> "RewardColumns":
        """The tick's components: the common ones (from the payoffs and the norm ledger's events), then the scenario's
        `own` (a name of its own that repeats a common one replaces it). `present`: the ids of the agents present
        after the tick, sorted; `keys` and `pay` the payoffs' ids and values as arrays, in the payoffs' order."""
        n = len(keys)
        if same_ids(keys, present):
            self = cls(present, None, payoffs)
        else:
            ids = present if (positions(present, keys) >= 0).all() else np.union1d(present, keys)
            self = cls(ids, positions(ids, keys), payoffs)
        if n:  # (no payoff at all: no agent's vector has one, as no dict had)
            self.columns["payoff"] = self._spread(pay)
            self.columns["welfare"] = self._spread(np.full(n, float(sum(payoffs.values())) / n))
            envy, guilt = inequity_columns(pay)
            self.columns["envy"], self.columns["guilt"] = self._spread(envy), self._spread(guilt)
        for name, values in (*norm_components(norm_events).items(), *own.items()):
            if len(values.ids if isinstance(values, Column) else values):
                self.columns[name] = _column(self.ids, values)
            else:  # nobody has it (a name of the scenario's own that repeats a common one still replaces it)
                self.columns.pop(name, None)
        return self

    def _spread(self, values: np.ndarray) -> np.ndarray:
        """Values of the paid agents (in the payoffs' order) as a column over `ids`."""
        if self.paid is None:
            return values
        out = np.zeros(len(self.ids))
        out[self.paid] = values
        return out

    def weigh(self, weights: Mapping[str, float]) -> dict[int, float]:
        """Each paid agent's weighted sum of components (`weighted`), keyed by agent in the payoffs' order."""
        total = weighted(self.columns, weights, len(self.ids))
        return dict(zip(self.payoffs, (total if self.paid is None else total[self.paid]).tolist()))

    def vectors(self, present: Sequence[int], keys: np.ndarray) -> RewardVectors:
        """The reward vectors of the agents present after the tick (`present`: their ids, sorted; `keys` the same as
        an int64 array); an agent that joined since the components were taken has none (a payoff of 0)."""
        columns = {name: values for name, values in self.columns.items() if name == "payoff" or values.any()}
        if not same_ids(keys, self.ids):
            at = positions(self.ids, keys)
            inside = at >= 0
            columns = {name: np.where(inside, values[np.maximum(at, 0)], 0.0) if len(values) else np.zeros(len(keys))
                       for name, values in columns.items()}
        return RewardVectors(present, columns)


def weighted(columns: Mapping[str, np.ndarray], weights: Mapping[str, float], n: int) -> np.ndarray:
    """`sum_c weights[c] * column_c`, added left to right in the weights' order and only where a component is non-zero
    (a component absent counts 0): the floats a per-agent loop over the non-zero components gives."""
    total = np.zeros(n)
    for name, w in weights.items():
        values = columns.get(name)
        if values is not None:
            total += np.where(values != 0, float(w) * values, 0.0)
    return total


def weigh(components: Mapping[str, Component], weights: Mapping[str, float], ids: Iterable[int]) -> dict[int, float]:
    """Each agent's weighted sum of components (a component an agent lacks counts 0). With the default weights
    ({payoff: 1}) this is the payoff itself, bit for bit."""
    ids = list(ids)
    keys = np.fromiter(ids, dtype=np.int64, count=len(ids))
    order = np.argsort(keys, kind="stable")
    by_id = keys[order]
    total = weighted({name: _column(by_id, values) for name, values in components.items()}, weights, len(ids))
    out = np.empty(len(ids))
    out[order] = total
    return dict(zip(ids, out.tolist()))


def nonzero(ids: Sequence[int], columns: Iterable[tuple[str, np.ndarray]]) -> dict[str, Column]:
    """Components from per-agent numpy columns aligned with `ids` (a zero is no component: it is neither stored nor
    weighed)."""
    return {name: Column(ids, values) for name, values in columns}


def unknown_weights(weights: Mapping[str, float], own: Iterable[str]) -> list[str]:
    """The weight names that are neither a common component nor one of the scenario's own (`own`)."""
    known = set(COMMON_COMPONENTS) | set(own)
    return sorted(set(weights) - known)


def _column(ids: np.ndarray, values: Component) -> np.ndarray:
    """A component as a column over the sorted `ids` (its agents outside `ids` are left out)."""
    if isinstance(values, Column):
        keys = np.asarray(values.ids, dtype=np.int64)
        vals = np.asarray(values.values, dtype=np.float64)
    else:
        keys = np.fromiter(values.keys(), dtype=np.int64, count=len(values))
        vals = np.fromiter(values.values(), dtype=np.float64, count=len(values))
    if same_ids(keys, ids):
        return vals
    out = np.zeros(len(ids))
    at = positions(ids, keys)
    inside = at >= 0
    out[at[inside]] = vals[inside]
    return out


def same_ids(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two id arrays hold the same ids in the same order (`np.array_equal`, without its fixed cost: the usual
    tick compares the same few int64 arrays several times)."""
    if a is b:
        return True
    if len(a) != len(b):
        return False
    return a.tobytes() == b.tobytes() if a.dtype == b.dtype else bool(np.array_equal(a, b))


def positions(ids: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """The position of each key in the sorted array `ids` (-1 where it is not there)."""
    if not len(ids):
        return np.full(len(keys), -1, dtype=np.int64)
    at = np.searchsorted(ids, keys)
    clipped = np.minimum(at, len(ids) - 1)
    return np.where(ids[clipped] == keys, clipped, -1)
