"""The fishery's validity probe: does a fisher's catch respond to the stock (GovSim's premise)?

The catch is asked in one space at every level: 0 to 100 tons, the largest stock probed. In a run the
catch space is 0 to the stock, and that bound alone made a fisher who catches 20 tons whatever the
stock read 10 / 20 / 20 at stocks 10 / 30 / 100, "responds: yes". With one bound a stock-blind catch
reads the same at every level, so only a catch that reads the stock moves. The negative control is
that fisher (20 tons at any stock), the positive one a fisher who takes a tenth of the stock it is told
(GovSim's sustainable share for 5 fishers, whatever the population: the share itself floors to 0 tons
in a fishery of 100,000).

A probe asks one fisher of month 1, whose request depends on the population only through its size (a
fact of the prompt): its worlds hold that one fisher and state the population's size, so a probe costs
the same for 5 fishers and for a million (`tests/test_probes.py` checks the requests are the same).
"""

from __future__ import annotations

import dataclasses
import math
from functools import cache
from typing import Any, Optional

from scenarios.commons import templates as tpl
from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from sim.core.spaces import Number
from sim.tick.probe import Control, Probe, enter_first_tick

LEVELS = (10.0, 30.0, 100.0)
#: the catch space at every level: 0 to the largest stock probed
SPACE = Number(0, max(LEVELS), 1)
BLIND_CATCH = 20.0


def _at_stock(model: Any, level: float) -> Optional[DecisionRequest]:
    """Month 1 with `level` tons in the lake; the lowest-id fisher's harvest request, its catch asked in SPACE."""
    enter_first_tick(model)
    if model.config.capacity < max(LEVELS):
        raise UsageError(f"the fishery probe puts up to {max(LEVELS):g} tons in the lake; capacity must be at least that "
                         f"(it is {model.config.capacity:g})")
    model.stock = model.stock_start = float(level)
    fisher = min(model.agents, key=lambda a: a.unique_id)
    request = model.observe(fisher, "harvest")
    return None if request is None else dataclasses.replace(request, space=SPACE)


@cache
def _one_fisher(cls: type) -> type:
    """`cls` building only its first fisher while its situation states the population's size."""

    class ProbeFishery(cls):  # type: ignore[misc, valid-type]
        # (used only for a uniform population: the first fisher's plan and entry are those of a fishery of one)
        def population_plan(self, n: int, **kwargs: Any) -> list[tuple[str, str, str]]:
            return super().population_plan(1, **kwargs)

        def entry_ticks(self, n: int) -> list[int]:
            return super().entry_ticks(1)

        def present(self) -> int:
            return self.config.fishers

    ProbeFishery.__qualname__ = ProbeFishery.__name__ = f"Probe{cls.__name__}"
    return ProbeFishery


def _world(cls: type, config: Any) -> type:
    """One fisher where the population is uniform (every fisher from month 1); the whole fishery otherwise."""
    return _one_fisher(cls) if config.population is None else cls


CATCH_BY_STOCK = Probe(
    name="catch_by_stock", variable="stock (tons)", levels=LEVELS, response="catch (tons)",
    finding="a fisher catches less from a depleted lake (GovSim: sustainability needs catches to follow the stock)",
    situate=_at_stock, measure=lambda value, request: float(value),
    blind=Control(f"catches {BLIND_CATCH:g} tons whatever the stock", lambda request, rng: BLIND_CATCH),
    follows=Control("catches a tenth of the stock it is told (GovSim's sustainable share for 5 fishers)",
                    lambda request, rng: float(math.floor(request.observation["stock"] / 10))),
    unforced=f"the catch is asked from 0 to {max(LEVELS):g} tons at every stock (a run's bound, the stock, is dropped): "
             "a catch that ignores the stock reads the same at every level",
    config={"talk": False, "norm_formation": False},
    questions={"harvest": (
        tpl.QUESTIONS["harvest"].template,
        "How much fish, in tons, will you catch this month?",
        "What is your catch for this month, in tons?",
        "This month, how many tons of fish do you take from the lake?",
        "Decide your catch for this month: how many tons of fish?",
        "How many tons do you fish this month?",
    )},
    world=_world,
)

PROBES = (CATCH_BY_STOCK,)
