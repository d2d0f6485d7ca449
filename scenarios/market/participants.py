"""Who takes part in the market and what passes between them: customers' assistants (`Shopper`), businesses'
service agents (`Seller`), the inquiries customers send and the proposals businesses answer with."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from sim.contracts.agent import SocietyAgent
from scenarios.market.data import Business, Customer
from sim.tick.model import SocietyModel


@dataclass
class Proposal:
    """An order proposal from one business to one customer."""

    business: int  # index into the market's businesses
    items: dict[str, float]  # item -> unit price
    total: float
    arrival: float  # tick time it reaches the customer
    search_rank: int
    full: bool = False  # holds every requested item
    amenities: bool = False  # the business has every required amenity
    rank: int = 0  # arrival order at this customer, 1 = first
    option: str = ""
    note: str = ""  # the business's answer to the amenities the customer asked about (`offer_amenities: asked`)


@dataclass
class Inquiry:
    customer: "Shopper"
    text: str
    arrival: float
    search_rank: int


class Shopper(SocietyAgent):
    """A customer's assistant: its request, search results, proposals and outcome."""

    def __init__(self, model: SocietyModel, customer: Customer, policy: str, strategy: str) -> None:
        super().__init__(model, policy=policy, strategy=strategy, memory=model.new_memory())
        self.customer = customer
        self.results: Optional[list[int]] = None
        self.messaged = False
        self.pending: set[int] = set()
        self.proposals: list[Proposal] = []
        self.done = False
        self.paid: Optional[Proposal] = None
        self.utility = 0.0
        self.gain = 0.0  # utility realised this tick


class Seller(SocietyAgent):
    """A business's service agent: its listing, inbox, latency and revenue."""

    def __init__(self, model: SocietyModel, index: int, business: Business, policy: str, strategy: str,
                 description: str, latency: float) -> None:
        super().__init__(model, policy=policy, strategy=strategy, memory=model.new_memory())
        self.index = index
        self.business = business
        self.description = description
        self.latency = latency
        self.inbox: list[Inquiry] = []
        self.revenue = 0.0
        self.income = 0.0  # revenue this tick
        self.floor_pct = min(100, math.ceil(business.min_price_factor * 100 - 1e-9))
