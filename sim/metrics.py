"""Social metrics as pure functions of plain data (lists and dicts keyed by agent id).

The four of Perolat et al. (2017), "A multi-agent reinforcement learning model of
common-pool resource appropriation": efficiency (utilitarian U), equality (1 - Gini),
sustainability (mean time at which rewards are collected) and peace (agents not
sanctioned per step).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def gini(values: Sequence[float]) -> float:
    """Gini coefficient of non-negative values (0 = perfect equality); 0 for empty or all-zero.

    Negative values are shifted so the minimum is 0, which keeps the index in [0, 1].
    """
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

    `update(rewards, sanctioned)` once per tick; `values()` equals `perolat()` over all ticks so far.
    """

    def __init__(self, n_agents: int) -> None:
        self.n_agents = n_agents
        self.ticks = 0
        self.reward_sum = 0.0
        self.returns: dict[int, float] = {}
        self.pos_time_sum: dict[int, int] = {}
        self.pos_count: dict[int, int] = {}
        self.not_sanctioned = 0

    def update(self, rewards: Mapping[int, float], sanctioned: int) -> None:
        self.ticks += 1
        t = self.ticks
        self.reward_sum += sum(rewards.values())
        returns, times, counts = self.returns, self.pos_time_sum, self.pos_count
        for agent, r in rewards.items():
            returns[agent] = returns.get(agent, 0.0) + r
            if r > 0:
                times[agent] = times.get(agent, 0) + t
                counts[agent] = counts.get(agent, 0) + 1
        self.not_sanctioned += self.n_agents - sanctioned

    def values(self) -> dict[str, float]:
        if not self.ticks:
            return perolat([], [], self.n_agents)
        sus = (sum(self.pos_time_sum[a] / self.pos_count[a] for a in self.pos_count) / len(self.pos_count)
               if self.pos_count else 0.0)
        return {
            "perolat_efficiency": self.reward_sum / self.ticks,
            "perolat_equality": equality(list(self.returns.values())),
            "perolat_sustainability": sus,
            "perolat_peace": self.not_sanctioned / self.ticks,
        }
