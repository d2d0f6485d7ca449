"""The market's validity probe: does a customer's choice respond to price (Magentic Marketplace's welfare)?"""

from __future__ import annotations

from typing import Any, Optional

from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from sim.tick.probe import Probe, enter_first_tick

#: the probed proposal arrives last, so a first-proposal bias works against it
PROBED_RANK = 3


def _third_offer_at(model: Any, level: float) -> Optional[DecisionRequest]:
    """The first customer holds three complete proposals (every item, every amenity) from the first three
    businesses; the first two at the request's value, the third at `level` x that; nothing else is pending. Its
    pay request."""
    if len(model.sellers) < PROBED_RANK:
        raise UsageError(f"the market probe needs at least {PROBED_RANK} businesses (three offers); "
                         f"this market has {len(model.sellers)}")
    enter_first_tick(model)
    shopper = model.shoppers[0]
    items = list(shopper.customer.items)
    base = max(0.01, round(shopper.customer.value, 2))
    shopper.pending = set()
    shopper.proposals = []
    for rank in range(1, PROBED_RANK + 1):
        unit = round(base * (float(level) if rank == PROBED_RANK else 1.0) / len(items), 2)
        model.offer(shopper, rank - 1, {i: unit for i in items}, full=True, amenities=True)
    return model.observe(shopper, "pay")


def _chose_probed(value: Any, request: DecisionRequest) -> float:
    probed = next(p["option"] for p in request.observation["proposals"] if p["rank"] == PROBED_RANK)
    return 1.0 if value == probed else 0.0


CHOICE_BY_PRICE = Probe(
    name="choice_by_price", variable="price of the last offer / the others'", levels=(0.5, 1.0, 1.5),
    response="chose the last offer (0/1)",
    finding="customers pay the better offer (Magentic Marketplace: welfare against the optimum)",
    situate=_third_offer_at, measure=_chose_probed, config={"llm_side": "customers"},
)

PROBES = (CHOICE_BY_PRICE,)
