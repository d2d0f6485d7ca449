"""The two-sided market (scenarios/market) in plain Mesa, on the same synthetic market data.

Each round every customer that has not searched searches (the market's own search index, at most `bandwidth`
results) and leaves if it found nothing; a new searcher sends an inquiry to every business it found, which
reaches business k after its latency; every business with inquiries due answers each with a proposal of the
requested items it sells at its menu prices (`honest`), in arrival order at each customer; then a customer pays
(`optimal`: once no answer is pending, the cheapest proposal with every item and amenity), waits or leaves.
A customer's utility is 2 x its request's value when its needs are met, less what it paid. Reported each round:
payments, welfare, revenue, needs met, messages, proposals, text replies and customers still shopping.

The world (the synthetic market, the search, the latencies, the utility) is the scenario's data and library
code; what a round does is written here. Nothing in a round draws, so it reproduces the engine's run.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Optional

import mesa

from scenarios.market import data as mdata
from scenarios.market.measures import utility
from scenarios.market.search import SearchIndex
from sim.core.rng import derive_seed


class Customer(mesa.Agent):
    """A customer's assistant: its request, what it found, the answers pending, the proposals at hand."""

    def __init__(self, model: "PlainMarket", customer: mdata.Customer) -> None:
        super().__init__(model)
        self.customer = customer
        self.results: Optional[list[int]] = None
        self.messaged = self.done = False
        self.pending: set[int] = set()
        self.proposals: list[tuple[int, dict[str, float], float, bool, bool]] = []  # business, items, total, full, amenities

    def message(self) -> None:
        m = self.model
        if self.done or self.messaged or self.results is None:
            return
        self.messaged = True
        for rank, k in enumerate(self.results):
            seller = m.businesses[k]
            seller.inbox.append((self, m.steps + seller.latency, rank))
            self.pending.add(k)
        m.counts["messages"] += len(self.results)

    def pay(self) -> None:
        m = self.model
        if self.done or not self.proposals:
            return
        if self.pending and m.steps < m.max_steps:
            return  # waits for every answer before it compares
        fit = [(total, rank, k, items) for rank, (k, items, total, full, amen) in enumerate(self.proposals) if full and amen]
        if not fit:
            m.finish(self, "left")
            return
        total, _, k, items = min(fit)
        seller = m.businesses[k]
        gain = utility(self.customer, seller.business, total, list(items))
        seller.revenue += total
        self.done = True
        m.counts["payments"] += 1
        m.counts["met"] += 1
        m.counts["welfare"] += gain
        m.counts["revenue"] += total


class Business(mesa.Agent):
    """A business's service agent: its listing, latency, inbox and revenue."""

    def __init__(self, model: "PlainMarket", index: int, business: mdata.Business, latency: float) -> None:
        super().__init__(model)
        self.index, self.business, self.latency = index, business, latency
        self.inbox: list[tuple[Customer, float, int]] = []  # customer, arrival, search rank
        self.revenue = 0.0

    def respond(self) -> None:
        m = self.model
        self.inbox = [q for q in self.inbox if not q[0].done]
        due = [q for q in self.inbox if q[1] < m.steps + 1]
        if not due:
            return
        self.inbox = [q for q in self.inbox if q[1] >= m.steps + 1]
        menu = self.business.menu
        for customer, arrival, rank in due:
            customer.pending.discard(self.index)
            wanted = customer.customer.items
            sold = {i: round(menu[i], 2) for i in wanted if i in menu}
            if not sold:
                m.counts["replies"] += 1
                continue
            full, amenities = len(sold) == len(wanted), self.business.has_amenities(customer.customer.amenities)
            m.arrived.append((customer.unique_id, arrival, rank, customer,
                              (self.index, sold, round(sum(sold.values()), 2), full, amenities)))


class PlainMarket(mesa.Model):
    """Customers and businesses of a synthetic market, trading until every customer is done or `max_steps`."""

    def __init__(self, customers: int, businesses: int, *, seed: int, bandwidth: int = 10, max_steps: int = 10,
                 latency_max: float = 2.0, search: str = "lexical") -> None:
        super().__init__(seed=seed)
        self.market = mdata.generate(customers, businesses, derive_seed(seed, "market"))
        self.index = SearchIndex(self.market.businesses)
        self.search, self.bandwidth, self.max_steps, self.seed_ = search, bandwidth, max_steps, seed
        self.customers = mesa.agent.AgentSet([Customer(self, cu) for cu in self.market.customers], random=self.random)
        draw = random.Random(derive_seed(seed, "latency"))
        self.businesses = [Business(self, k, b, draw.random() * latency_max) for k, b in enumerate(self.market.businesses)]
        self.sellers = mesa.agent.AgentSet(self.businesses, random=self.random)
        self.metrics: dict[str, float] = {}

    def finish(self, customer: Customer, how: str) -> None:
        customer.done = True

    def step(self) -> None:
        self.counts = dict.fromkeys(("payments", "welfare", "revenue", "proposals", "messages", "replies", "met"), 0)
        for c in self.customers:
            if not c.done and c.results is None:
                rng = random.Random(derive_seed(self.seed_, "search", c.customer.id))
                c.results = self.index.search(self.search, c.customer, self.bandwidth, rng)
                if not c.results:
                    self.finish(c, "left")
        self.customers.shuffle_do("message")
        self.arrived: list = []
        self.sellers.shuffle_do("respond")
        self.arrived.sort(key=lambda a: a[:3])
        for *_, customer, proposal in self.arrived:
            customer.proposals.append(proposal)
        self.counts["proposals"] += len(self.arrived)
        self.customers.shuffle_do("pay")
        last = self.steps >= self.max_steps
        for c in self.customers:
            if not c.done and ((not c.pending and not c.proposals) or last):
                self.finish(c, "timed_out" if last and (c.pending or c.proposals) else "left")
        self.metrics = {**{k: float(v) for k, v in self.counts.items()},
                        "active_customers": float(sum(not c.done for c in self.customers))}
        if all(c.done for c in self.customers):
            self.running = False


#: the engine's scenario this model stands beside
SCENARIO = "market"


def timing(customers: int = 1000, businesses: int = 300) -> tuple[list[str], Callable[[int], PlainMarket], int]:
    """The timed pair: a synthetic market of `customers` and `businesses`, 10 rounds at most."""
    sets = [f"customers_n={customers}", f"businesses_n={businesses}", "max_steps=10"]
    return sets, lambda seed: PlainMarket(customers, businesses, seed=seed), 10


def check() -> tuple[list[str], Callable[[int], PlainMarket], int, dict[str, str]]:
    """The pair that must agree: 60 customers and 40 businesses whose answers take up to 6 rounds."""
    sets = ["customers_n=60", "businesses_n=40", "max_steps=10", "latency_max=6"]
    keys = ("payments", "welfare", "revenue", "messages", "proposals", "active_customers")
    plain = lambda seed: PlainMarket(60, 40, seed=seed, latency_max=6)  # noqa: E731
    return sets, plain, 10, {k: k for k in keys} | {"replies": "text_replies", "met": "needs_met"}
