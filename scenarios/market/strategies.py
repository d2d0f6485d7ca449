"""Scripted customers (optimal, first, cheapest, random_match) and businesses (honest, discount, manipulative).

A strategy reads only the request's observation. Customers answer the `search` phase (with
`customer_search`: a query, their request's text and items), the `message` phase (an
inquiry text) and the `pay` phase (a proposal's option, `wait` or `leave`); businesses answer
the `respond` phase (the percentage of menu prices they charge this round).

Pay observation: `proposals` [{option, total, full (has every requested item), amenities
(business has every required amenity), rank (arrival order, 1 = first)}], `can_wait` (answers
still pending and steps left).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from sim.core.contracts import DecisionRequest

WAIT, LEAVE = "wait", "leave"
CUSTOMER_STRATEGIES = ("optimal", "first", "cheapest", "random_match")
BUSINESS_STRATEGIES = ("honest", "discount", "manipulative")


def inquiry(obs: dict) -> str:
    """The scripted customer's message: the items it wants (and, where it must ask: `ask`, the amenities it needs)."""
    ask = obs.get("ask")
    return "Hello, please send an offer for: " + ", ".join(obs["items"]) + "." + (
        " Do you have: " + ", ".join(ask) + "?" if ask else "")


def _pick(name: str, obs: dict, rng: random.Random) -> str:
    props = obs["proposals"]
    full = [p for p in props if p["full"]]
    if name == "first":
        if full:
            return min(full, key=lambda p: p["rank"])["option"]
        return WAIT if obs["can_wait"] else LEAVE
    if obs["can_wait"]:
        return WAIT  # the others compare every answer before paying
    if name == "optimal":
        full = [p for p in full if p["amenities"]]
    if not full:
        return LEAVE
    if name == "random_match":
        return rng.choice(full)["option"]
    return min(full, key=lambda p: (p["total"], p["rank"]))["option"]


def search_query(obs: dict) -> str:
    """The scripted customer's own search query (`customer_search`): its request's text and items."""
    return " ".join([obs["request"], *obs["items"]])


def _customer(name: str) -> Callable[[DecisionRequest, random.Random], object]:
    def decide(request: DecisionRequest, rng: random.Random):
        if request.phase == "search":
            return search_query(request.observation)
        if request.phase == "message":
            return inquiry(request.observation)
        if request.phase == "pay":
            return _pick(name, request.observation, rng)
        raise ValueError(f"customer strategy {name!r} has no answer for phase {request.phase!r}")

    decide.__name__ = name
    return decide


def _business(name: str) -> Callable[[DecisionRequest, random.Random], object]:
    def decide(request: DecisionRequest, rng: random.Random):
        if request.phase != "respond":
            raise ValueError(f"business strategy {name!r} has no answer for phase {request.phase!r}")
        obs = request.observation
        return float(obs["floor_pct"] if name == "discount" else 100)

    decide.__name__ = name
    return decide


STRATEGIES = {**{n: _customer(n) for n in CUSTOMER_STRATEGIES}, **{n: _business(n) for n in BUSINESS_STRATEGIES}}
