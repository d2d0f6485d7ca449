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


def optimal_welfare_at_floor(market: Market, index: SearchIndex, floor_pct: Sequence[int]) -> float:
    """`optimal_welfare` with each business at the lowest price it may charge: `floor_pct[k]` % of its menu.

    The welfare ratio's denominator when businesses may discount: each customer's best deal is the qualifying
    business at its floor (priced as the model prices an offer, `round(menu x pct / 100, 2)` per item; numpy's
    rounding for one-item requests, which may differ by a cent at exact half cents), and a deal worth less than
    nothing counts 0 (the customer may leave). So welfare / this optimum stays at most 1, where against the
    menu-price optimum a run whose businesses discount reads above 1. With no business that may discount
    (`floor_pct` all 100) it is `optimal_welfare` itself, Magentic's optimum.
    """
    pct = np.asarray(floor_pct, dtype=float)
    if (pct >= 100).all():
        return optimal_welfare(market, index)
    businesses = market.businesses
    menus: dict[str, np.ndarray] = {}
    total = 0.0
    for c in market.customers:
        if len(c.items) == 1:
            item = next(iter(c.items))
            ks = index.sellers_array(item)
            met = index.amenity_flags(ks, c.amenities)
            if not met.any():
                continue
            if item not in menus:
                menus[item] = np.asarray([businesses[k].menu[item] for k in ks.tolist()], dtype=float)
            prices = np.round(menus[item][met] * pct[ks[met]] / 100.0, 2)
            total += max(0.0, 2.0 * c.value - float(prices.min()))
            continue
        best = None
        for k in index.selling_all(c):
            b = businesses[k]
            if not b.has_amenities(c.amenities):
                continue
            price = round(sum(round(b.menu[i] * pct[k] / 100.0, 2) for i in c.items), 2)
            best = price if best is None or price < best else best
        if best is not None:
            total += max(0.0, 2.0 * c.value - best)
    return total


def cheapest_welfare(market: Market, index: SearchIndex) -> float:
    """Each customer pays the cheapest menu match (sells every item), amenities ignored."""
    total = 0.0
    for c in market.customers:
        k = next(index.cheapest(c, key=_cents), None)
        if k is not None:
            total += menu_utility(c, market.businesses[k])
    return total


def match_utilities(market: Market, index: SearchIndex, *, amenities: bool) -> list[np.ndarray]:
    """For each customer with a match, in customer order: its utility at each match, at menu price.

    A match sells every requested item (and, with `amenities`, has every required amenity). A one-item request's
    utilities at its (maybe thousands of) matches come from one array operation: `menu_utility`'s subtraction of
    the same rounded prices.
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
    return options


def median_of_draws(options: Sequence[np.ndarray], draws: int, seed: int) -> float:
    """Median over `draws` seeded draws of the sum of one uniformly picked utility per customer (numpy's generator,
    one vectorised call per customer, so 20,000 draws cost what 200 did); 0 without customers to draw for."""
    rng = np.random.default_rng(seed)
    totals = np.zeros(draws)
    for utilities in options:  # customer order, one array addition each: the same sums as one draw at a time
        totals += utilities[rng.integers(0, len(utilities), draws)]
    return float(np.median(totals)) if options else 0.0


def random_welfare_median(market: Market, index: SearchIndex, *, amenities: bool, draws: int, seed: int,
                          exact_stream: bool = True) -> float:
    """Median over seeded draws of: each customer pays a uniformly random match at menu price (`match_utilities`).

    Each draw picks, in customer order, one match per customer with a match. `exact_stream` (the first metric
    definitions') draws as `rng.choice` over its matches would with `random.Random(seed)` (the same `_randbelow(n)`),
    the picked utilities added in customer order, one array addition per customer across all draws: the same IEEE
    additions, in the same order, so the same sums. Without it (runs of contract 6 on) the draws come from numpy's
    generator (`median_of_draws`), so 20,000 draws cost what 200 did.
    """
    options = match_utilities(market, index, amenities=amenities)
    return _median_of_draws_python(options, draws, seed) if exact_stream else median_of_draws(options, draws, seed)


def baselines(market: Market, index: SearchIndex, customers: int, draws: Optional[int],
              seed: int) -> tuple[dict[str, float], int]:
    """The random-match medians (any match; matches with every amenity) and the draws they took: `draws`, else
    `baseline_draws(customers)`."""
    draws = draws or baseline_draws(customers)
    return {"baseline_any_median": random_welfare_median(market, index, amenities=False, draws=draws, seed=seed,
                                                         exact_stream=False),
            "baseline_any_amenities_median": random_welfare_median(market, index, amenities=True, draws=draws,
                                                                   seed=seed + 1, exact_stream=False)}, draws


def ratio_optimum(market: Market, index: SearchIndex, floor_pct: Sequence[int], optimal: float) -> float:
    """What the welfare ratio divides by: the optimum at the lowest prices the sellers may charge (`floor_pct`, 100
    for a seller that never discounts), which is `optimal` (the menu optimum) when none may discount."""
    return optimal_welfare_at_floor(market, index, floor_pct) if min(floor_pct, default=100) < 100 else optimal


def corrected_figures(ratio_optimum: float, draws: int) -> dict[str, float]:
    """The final figures the corrected definitions add: the ratio's optimum and the baselines' draws."""
    return {"optimal_welfare_at_floor": ratio_optimum, "baseline_draws": float(draws)}


def baseline_draws(customers: int, budget: int = 40_000_000) -> int:
    """How many draws the random-match medians take by default: 20,000 (the median's noise then ~1% of the
    published baselines on the Magentic markets; 200 draws gave 49.9 against the published 64.2 on mexican_10_30),
    fewer where customers x draws would pass `budget` picks, never fewer than 200 (a large market's sum of many
    independent picks is concentrated, so its median needs fewer draws)."""
    return int(max(200, min(20_000, budget // max(1, customers))))


def _median_of_draws_python(options: Sequence[np.ndarray], draws: int, seed: int) -> float:
    """The first metric definitions' draws: `random.Random(seed)`, one `randrange` per customer per draw."""
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
