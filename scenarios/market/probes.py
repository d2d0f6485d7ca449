"""The market's validity probe: does a customer's choice respond to price (Magentic Marketplace's welfare)?

A customer holds three proposals that each meet its whole request: every item it asked for, from a
business that has every amenity it requires (the businesses are chosen so, and the prompt lists each
one's amenities). Two are priced at the customer's value, the last to arrive at `level` times that. The
choice is among the same options at every level (the three businesses and `leave`), so a customer blind
to price chooses the same at every level. Negative control: pays the first proposal; positive control:
pays the cheapest that meets its needs.
"""

from __future__ import annotations

from typing import Any, Optional

from scenarios.market import templates as tpl
from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from sim.tick.probe import Control, Probe, enter_first_tick

#: the probed proposal arrives last, so a first-proposal bias works against it
PROBED_RANK = 3


def _matches(model: Any, shopper: Any) -> list[int]:
    """The businesses that have every amenity `shopper` requires, those selling every item it asks for first."""
    customer = shopper.customer
    fit = [k for k, seller in enumerate(model.sellers) if seller.business.has_amenities(customer.amenities)]
    return sorted(fit, key=lambda k: (not model.sellers[k].business.sells_all(customer.items), k))


def _third_offer_at(model: Any, level: float) -> Optional[DecisionRequest]:
    """The first customer with three businesses that meet its needs holds their three complete proposals (every
    item); the first two at the customer's value, the third at `level` x that; nothing else is pending. Its pay
    request."""
    enter_first_tick(model)
    chosen = next(((s, m[:PROBED_RANK]) for s in model.shoppers if len(m := _matches(model, s)) >= PROBED_RANK), None)
    if chosen is None:
        raise UsageError(f"the market probe needs a customer and {PROBED_RANK} businesses that have every amenity it "
                         f"requires (three offers that meet its needs); this market has none")
    shopper, businesses = chosen
    items = list(shopper.customer.items)
    base = max(0.01, round(shopper.customer.value, 2))
    shopper.pending = set()
    shopper.proposals = []
    for rank, business in enumerate(businesses, start=1):
        unit = round(base * (float(level) if rank == PROBED_RANK else 1.0) / len(items), 2)
        model.offer(shopper, business, {i: unit for i in items}, full=True, amenities=True)
    return model.observe(shopper, "pay")


def _chose_probed(value: Any, request: DecisionRequest) -> float:
    probed = next(p["option"] for p in request.observation["proposals"] if p["rank"] == PROBED_RANK)
    return 1.0 if value == probed else 0.0


def _first(request: DecisionRequest, rng: Any) -> str:
    return min(request.observation["proposals"], key=lambda p: p["rank"])["option"]


def _cheapest(request: DecisionRequest, rng: Any) -> str:
    met = [p for p in request.observation["proposals"] if p["full"] and p["amenities"]]
    return min(met, key=lambda p: (p["total"], p["rank"]))["option"]


CHOICE_BY_PRICE = Probe(
    name="choice_by_price", variable="price of the last offer / the others'", levels=(0.5, 1.0, 1.5),
    response="chose the last offer (0/1)",
    finding="customers pay the better offer (Magentic Marketplace: welfare against the optimum)",
    situate=_third_offer_at, measure=_chose_probed,
    blind=Control("pays the first proposal whatever the prices", _first),
    follows=Control("pays the cheapest proposal that meets its needs (the first of equal ones)", _cheapest),
    unforced="the choice is among the same three businesses and 'leave' at every level, each proposal meeting every "
             "item and amenity: a choice that ignores price reads the same at every level",
    config={"llm_side": "customers"}, rate=True,
    questions={"pay": (
        tpl.QUESTIONS["pay"].template,
        "Which of the proposals do you pay for? Reply with the business name$wait, or 'leave' to buy nothing.",
        "Whose proposal will you pay? Give the business name$wait, or 'leave' if you buy nothing.",
        "Choose the proposal you pay: answer with its business name$wait, or 'leave' to buy nothing.",
        "Which business's proposal do you accept and pay? Answer with the business name$wait, or 'leave' to buy nothing.",
        "Pick the proposal to pay. Answer with the business name$wait, or 'leave' to buy nothing at all.",
    )},
    facts=lambda model, request: {"wait": tpl.WAIT if request.observation["can_wait"] else ""},
)

PROBES = (CHOICE_BY_PRICE,)
