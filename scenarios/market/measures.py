"""Welfare of reference assignments and revenue concentration: pure functions of market data.

Customer utility (Magentic Marketplace): 2 x the sum of the requested items' values if the
paid order contains every requested item and the business has every required amenity,
minus all payments. Welfare = the sum of customers' utilities.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from typing import Optional

import numpy as np

from scenarios.market.data import Business, Customer, Market
from scenarios.market.search import SearchIndex
from sim.reward.metrics import gini


def utility(customer: Customer, business: Business, paid: float, items: Sequence[str]) -> float:
    """The customer's utility from paying `paid` for `items` bought from `business`."""
    met = all(i in items for i in customer.items) and business.has_amenities(customer.amenities)
    return (2.0 * customer.value if met else 0.0) - paid


def menu_total(customer: Customer, business: Business) -> float:
    """The menu price of the customer's requested items at this business (all must be sold)."""
    return round(sum(business.menu[i] for i in customer.items), 2)


def menu_utility(customer: Customer, business: Business) -> float:
    """Utility of buying the request at menu price from a business that sells every item."""
    return utility(customer, business, menu_total(customer, business), list(customer.items))


def _cents(total: float) -> float:
    return round(total, 2)


def optimal_choice(customer: Customer, businesses: Sequence[Business], index: SearchIndex) -> Optional[int]:
    """Index of the business that meets items and amenities at the lowest menu total (ties: first), or None."""
    return next(index.cheapest(customer, lambda b: b.has_amenities(customer.amenities), key=_cents), None)


def optimal_welfare(market: Market, index: SearchIndex) -> float:
    """Each customer matched to the cheapest business meeting items and amenities (0 if none)."""
    total = 0.0
    for c in market.customers:
        k = optimal_choice(c, market.businesses, index)
        if k is not None:
            total += menu_utility(c, market.businesses[k])
    return total


def cheapest_welfare(market: Market, index: SearchIndex) -> float:
    """Each customer pays the cheapest menu match (sells every item), amenities ignored."""
    total = 0.0
    for c in market.customers:
        k = next(index.cheapest(c, key=_cents), None)
        if k is not None:
            total += menu_utility(c, market.businesses[k])
    return total


def random_welfare_median(market: Market, index: SearchIndex, *, amenities: bool, draws: int, seed: int) -> float:
    """Median over seeded draws of: each customer pays a uniformly random match at menu price.

    A match sells every requested item (and, with `amenities`, has every required amenity). Each draw picks, in
    customer order, one match per customer with a match, as `rng.choice` over its matches would (the same
    `_randbelow(n)`); the picked utilities are added in customer order, one array addition per customer across
    all draws: the same IEEE additions, in the same order, so the same sums. A one-item request's utilities at
    its (maybe thousands of) matches come from one array operation: `menu_utility`'s subtraction of the same
    rounded prices.
    """
    businesses = market.businesses
    options = []
    for c in market.customers:
        if len(c.items) != 1:
            ks = [k for k in index.selling_all(c) if not amenities or businesses[k].has_amenities(c.amenities)]
            utilities = np.asarray([menu_utility(c, businesses[k]) for k in ks], dtype=float)
        else:
            item = next(iter(c.items))
            ks = index.sellers_array(item)
            met = index.amenity_flags(ks, c.amenities)
            utilities = np.where(met, 2.0 * c.value, 0.0) - index.cents(item)
            if amenities:
                utilities = utilities[met]
        if len(utilities):
            options.append(utilities)
    rng = random.Random(seed)
    sizes = [len(u) for u in options]
    picks = np.asarray([[rng.randrange(n) for n in sizes] for _ in range(draws)], dtype=np.int64).reshape(draws, -1)
    totals = np.zeros(draws)
    for c, utilities in enumerate(options):
        totals += utilities[picks[:, c]]
    sums = totals.tolist()
    return float(statistics.median(sums)) if sums else 0.0


def hhi(values: Sequence[float]) -> Optional[float]:
    """Herfindahl-Hirschman index of shares (sum of squared shares, 0..1); None when the total is 0."""
    total = sum(values)
    if total <= 0:
        return None
    return sum((v / total) ** 2 for v in values)


def revenue_gini(values: Sequence[float]) -> float:
    """Gini of business revenues (0 = equal)."""
    return gini(values)
