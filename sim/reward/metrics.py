"""Social metrics as pure functions of plain data (lists and dicts keyed by agent id).

The four of Perolat et al. (2017), "A multi-agent reinforcement learning model of
common-pool resource appropriation": efficiency (utilitarian U), equality (1 - Gini),
sustainability (mean time at which rewards are collected) and peace (agents not
sanctioned per step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Optional

import numpy as np


def gini(values: Sequence[float]) -> float:
    """Gini coefficient of non-negative values (0 = perfect equality); 0 for empty or all-zero.

    Negative values are shifted so the minimum is 0, which keeps the index in [0, 1].
    From 256 values on it runs in numpy, to the same bits: the sort is the same and the sums are
    running sums (`cumsum` adds left to right, as Python 3.11's `sum` of floats does).
    """
    if not isinstance(values, (list, tuple, np.ndarray)):
        values = list(values)
    if len(values) >= 256:
        if isinstance(values, np.ndarray) and values.dtype == np.float64:
            return _gini_array(values)
        return _gini_array(np.fromiter(map(float, values), dtype=np.float64, count=len(values)))  # float() as below
    return _gini_python(values)


def _gini_python(values: Sequence[float]) -> float:
    """`gini` one value at a time (the definition the numpy path reproduces to the bit)."""
    xs = sorted(float(v) for v in values)
    if not xs:
        return 0.0
    low = xs[0]
    if low < 0:
        xs = [x - low for x in xs]
    total = sum(xs)
    if total <= 0:
        return 0.0
    n = len(xs)
    weighted = sum((i + 1) * x for i, x in enumerate(xs))
    return (2.0 * weighted) / (n * total) - (n + 1.0) / n


def _gini_array(xs: np.ndarray) -> float:
    xs = np.sort(xs)
    low = float(xs[0])
    if low < 0:
        xs = xs - low
    total = float(np.cumsum(xs)[-1]) + 0.0
    if total <= 0:
        return 0.0
    n = len(xs)
    weighted = float(np.cumsum(np.arange(1, n + 1, dtype=np.float64) * xs)[-1]) + 0.0
    return (2.0 * weighted) / (n * total) - (n + 1.0) / n


def equality(values: Sequence[float]) -> float:
    """1 - Gini."""
    return 1.0 - gini(values)


def efficiency(rewards_by_tick: Sequence[Mapping[int, float]]) -> float:
    """Perolat's U: the sum of all agents' rewards divided by the number of steps."""
    if not rewards_by_tick:
        return 0.0
    return sum(sum(r.values()) for r in rewards_by_tick) / len(rewards_by_tick)


def sustainability(rewards_by_tick: Sequence[Mapping[int, float]]) -> float:
    """Perolat's S: over agents, the mean of the average step (1-based) of positive rewards.

    Agents who never got a positive reward do not count; 0 when nobody did.
    """
    times: dict[int, list[int]] = {}
    for t, rewards in enumerate(rewards_by_tick, start=1):
        for agent, r in rewards.items():
            if r > 0:
                times.setdefault(agent, []).append(t)
    if not times:
        return 0.0
    return sum(sum(ts) / len(ts) for ts in times.values()) / len(times)


def peace(sanctioned_by_tick: Sequence[int], n_agents: int) -> float:
    """Perolat's P: the mean number of agents not sanctioned (tagged) per step."""
    if not sanctioned_by_tick:
        return float(n_agents)
    return sum(n_agents - s for s in sanctioned_by_tick) / len(sanctioned_by_tick)


def perolat(
    rewards_by_tick: Sequence[Mapping[int, float]],
    sanctioned_by_tick: Sequence[int],
    n_agents: int,
) -> dict[str, float]:
    """All four Perolat metrics, prefixed `perolat_`."""
    returns: dict[int, float] = {}
    for rewards in rewards_by_tick:
        for agent, r in rewards.items():
            returns[agent] = returns.get(agent, 0.0) + r
    return {
        "perolat_efficiency": efficiency(rewards_by_tick),
        "perolat_equality": equality(list(returns.values())),
        "perolat_sustainability": sustainability(rewards_by_tick),
        "perolat_peace": peace(sanctioned_by_tick, n_agents),
    }


class PerolatTracker:
    """The four Perolat metrics kept incrementally: O(N) per tick instead of O(ticks x N).

    `update(rewards, sanctioned)` once per tick; `values()` equals `perolat()` over all ticks so far,
    to the bit. While every tick rewards the same agents in the same order (the usual case) the
    running sums are numpy arrays in that order; the first tick that differs turns them into
    per-agent dicts for good. Sums run in the order `perolat()` adds them (sustainability: agents
    in the order of their first positive reward) so that both give the same floats.
    """

    def __init__(self, n_agents: int) -> None:
        self.n_agents = n_agents
        self.ticks = 0
        self.reward_sum = 0.0
        self.not_sanctioned = 0
        # array mode: the agents (rewards' keys) and their running sums, by position
        self._keys: Optional[list[int]] = None
        self._returns = np.zeros(0)
        self._times = np.zeros(0, dtype=np.int64)
        self._counts = np.zeros(0, dtype=np.int64)
        self._first_positive: list[np.ndarray] = []  # positions, in the order they first got a positive reward
        # dict mode (after the agents changed)
        self._dicts: Optional[tuple[dict[int, float], dict[int, int], dict[int, int]]] = None

    def update(self, rewards: Mapping[int, float], sanctioned: int) -> None:
        self.ticks += 1
        t = self.ticks
        self.reward_sum += sum(rewards.values())
        self.not_sanctioned += self.n_agents - sanctioned
        if self._dicts is None:
            keys = list(rewards)
            if self._keys is None:
                self._keys = keys
                n = len(keys)
                self._returns, self._times, self._counts = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
            if keys == self._keys:
                r = np.fromiter(rewards.values(), dtype=np.float64, count=len(keys))
                self._returns += r
                positive = r > 0
                if positive.any():
                    new = positive & (self._counts == 0)
                    self._times[positive] += t
                    self._counts[positive] += 1
                    if new.any():
                        self._first_positive.append(np.flatnonzero(new))
                return
            self._to_dicts()
        returns, times, counts = self._dicts
        for agent, r in rewards.items():
            returns[agent] = returns.get(agent, 0.0) + r
            if r > 0:
                times[agent] = times.get(agent, 0) + t
                counts[agent] = counts.get(agent, 0) + 1

    def _to_dicts(self) -> None:
        keys = self._keys or []
        positions = self._order().tolist()
        times, counts = self._times.tolist(), self._counts.tolist()
        self._dicts = (dict(zip(keys, self._returns.tolist())), {keys[i]: times[i] for i in positions},
                       {keys[i]: counts[i] for i in positions})

    def _order(self) -> np.ndarray:
        return np.concatenate(self._first_positive) if self._first_positive else np.zeros(0, dtype=np.int64)

    @property
    def returns(self) -> dict[int, float]:
        """agent id -> sum of its rewards so far."""
        if self._dicts is not None:
            return self._dicts[0]
        return dict(zip(self._keys or [], self._returns.tolist()))

    def values(self) -> dict[str, float]:
        if not self.ticks:
            return perolat([], [], self.n_agents)
        if self._dicts is not None:
            returns, times, counts = self._dicts
            sus = sum(times[a] / counts[a] for a in counts) / len(counts) if counts else 0.0
            gains: Sequence[float] = list(returns.values())
        else:
            order = self._order()
            if len(order):
                ratios = self._times[order] / self._counts[order]  # int / int, correctly rounded as Python's
                sus = (float(np.cumsum(ratios)[-1]) + 0.0) / len(order)
            else:
                sus = 0.0
            gains = self._returns
        return {
            "perolat_efficiency": self.reward_sum / self.ticks,
            "perolat_equality": equality(gains),
            "perolat_sustainability": sus,
            "perolat_peace": self.not_sanctioned / self.ticks,
        }
