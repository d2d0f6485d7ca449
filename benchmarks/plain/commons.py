"""The fishery (scenarios/commons) in plain Mesa: catches, unit-by-unit rationing, regrowth, collapse.

Each month every fisher picks a catch with its strategy (`random`: a whole number of tons from 0 to
stock / N, drawn from the model's RNG; `greedy`: stock / N; `sustainable`: GovSim's share; `fixed`: the
`catch`), at most the stock; demand beyond the stock is rationed one ton at a time to random fishers with
demand left; the rest regrows (x `regrowth`, at most the capacity) the next month. Reported each month:
the stock, the month's catch, the mean and equality of the fishers' gains so far.

Reproduces the engine on any config whose strategy does not draw (the engine draws a fisher's catch from
its decision seed, this model from the model's RNG): `shuffle_do` takes the same draws as the engine's
seeded order of decisions, so rationing takes the same fishers.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import mesa

from sim.reward.metrics import equality


class Fisher(mesa.Agent):
    """A fisher: the catch it asks for this month and its gains so far."""

    def __init__(self, model: "PlainCommons", strategy: str) -> None:
        super().__init__(model)
        self.strategy = strategy
        self.demand = 0.0
        self.gain = 0.0

    def step(self) -> None:
        m = self.model
        share = m.stock / m.n
        if self.strategy == "random":
            want = m.random.randint(0, math.floor(share))
        elif self.strategy == "greedy":
            want = math.floor(share)
        elif self.strategy == "sustainable":
            want = math.floor(m.stock * (1 - 1 / m.regrowth) / m.n)
        else:
            want = m.catch
        self.demand = float(min(want, math.floor(m.stock)))


class PlainCommons(mesa.Model):
    """N fishers and a lake that starts full."""

    def __init__(self, n: int, *, seed: int, capacity: float, strategy: str = "random", regrowth: float = 2.0,
                 catch: float = 10.0, collapse_below: float = 5.0) -> None:
        super().__init__(seed=seed)
        self.n, self.capacity, self.stock, self.regrowth = n, float(capacity), float(capacity), regrowth
        self.catch, self.collapse_below = catch, collapse_below
        self.metrics: dict[str, float] = {}
        for _ in range(n):
            Fisher(self, strategy)

    def step(self) -> None:
        if self.steps > 1:
            self.stock = min(self.capacity, self.stock * self.regrowth)
        self.agents.shuffle_do("step")
        demand = {a.unique_id: a.demand for a in self.agents}
        caught = self.ration(demand) if sum(demand.values()) > self.stock else demand
        for a in self.agents:
            a.gain += caught[a.unique_id]
        total = sum(caught.values())
        self.stock -= total
        gains = [a.gain for a in self.agents]
        self.metrics = {"stock": self.stock, "catch_total": total, "gain_so_far": sum(gains) / self.n,
                        "equality": equality(gains)}
        if self.stock < self.collapse_below:
            self.running = False

    def ration(self, demand: dict[int, float]) -> dict[int, float]:
        """Units go one by one to random fishers with demand left until the stock is gone."""
        caught = dict.fromkeys(demand, 0.0)
        left = {k: v for k, v in demand.items() if v > 0}
        ids, available = sorted(left), self.stock
        while available > 1e-9 and ids:
            j = self.random.randrange(len(ids))
            k = ids[j]
            unit = min(1.0, left[k], available)
            caught[k] += unit
            available -= unit
            left[k] -= unit
            if left[k] <= 1e-9:
                ids[j] = ids[-1]
                ids.pop()
        return caught


#: the engine's scenario this model stands beside
SCENARIO = "commons"


def timing(n: int, months: int = 12) -> tuple[list[str], Callable[[int], PlainCommons], int]:
    """The timed pair: the engine's `--set`s, the plain model for a seed, the ticks. Random catches from 0 to stock / N
    (the capacity grows with N so that they are not all 0), no collapse."""
    sets = [f"fishers={n}", f"months={months}", "strategy=random", f"capacity={20 * n}", "collapse_below=0"]
    return sets, lambda seed: PlainCommons(n, seed=seed, capacity=20 * n, collapse_below=0), months


def check() -> tuple[list[str], Callable[[int], PlainCommons], int, dict[str, str]]:
    """The pair that must agree (plain metric -> the engine's): 40 fishers asking 15 tons of a lake of 1,000, which
    shrinks until the third month's catches are rationed and it collapses."""
    sets = ["fishers=40", "months=12", "strategy=fixed", "catch=15", "capacity=1000", "collapse_below=5"]
    plain = lambda seed: PlainCommons(40, seed=seed, capacity=1000, strategy="fixed", catch=15, collapse_below=5)  # noqa: E731
    return sets, plain, 12, {"stock": "stock", "catch_total": "catch_total", "gain_so_far": "gain_so_far",
                             "equality": "perolat_equality"}
