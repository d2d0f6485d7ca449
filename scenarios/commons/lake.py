"""The lake's dynamics (GovSim): regrowth up to capacity, and rationing when the fishers ask for more than it holds."""

from __future__ import annotations

import random
from collections.abc import Mapping


def regrown(stock: float, capacity: float, regrowth: float) -> float:
    """The stock a month later: what was left multiplied by `regrowth`, capped at `capacity`."""
    return min(capacity, stock * regrowth)


def sustainable_catch(stock: float, regrowth: float, fishers: int) -> float:
    """GovSim's sustainable share: each fisher's part of the catch the stock regrows within a month."""
    return stock * (1 - 1 / regrowth) / fishers


def ration(demand: Mapping[int, float], stock: float, rng: random.Random) -> Mapping[int, float]:
    """What each fisher lands: its demand when the lake holds it all (the same mapping: nothing was rationed), else
    GovSim's rationing: units go one by one to random fishers with demand left until the stock is gone.

    O(N log N + units): the fishers with demand left are kept in a list (sorted once by id) from which an
    exhausted one is removed by swapping in the last, so each unit costs O(1).
    """
    if sum(demand.values()) <= stock:
        return demand
    caught = {aid: 0.0 for aid in demand}
    left = {aid: amt for aid, amt in demand.items() if amt > 0}
    ids = sorted(left)
    available = stock
    while available > 1e-9 and ids:
        k = rng.randrange(len(ids))
        aid = ids[k]
        unit = min(1.0, left[aid], available)
        caught[aid] += unit
        available -= unit
        left[aid] -= unit
        if left[aid] <= 1e-9:
            ids[k] = ids[-1]
            ids.pop()
    return caught
