"""A two-sided agentic market on the Magentic Marketplace data (microsoft/multi-agent-marketplace).

Customers' assistants shop for a request (items with values, required amenities); businesses'
service agents sell. A tick is one round of the protocol, in three decision phases:

1. update: every customer that has not searched yet searches (the configured algorithm,
   at most `bandwidth` results) and finishes at once if it found nothing;
2. `message` (customers): a new searcher sends one inquiry to every business it found; the
   inquiry reaches business k after its latency (`latency`, in ticks, seeded);
3. `respond` (businesses): each business with inquiries due this tick sets the percentage of
   its menu prices it charges this round (floor: `min_price_factor`; `pricing: menu`: no decision,
   menu prices) and answers every due inquiry with a proposal of the requested items it sells
   (`offer_items: message`: of the menu items the message names, `conversation`), or a text reply
   if it sells none; proposals reach each customer in arrival order (sent + latency; ties by
   search rank);
4. `pay` (customers): pay one proposal, wait for more, or leave. A customer stops after
   paying, leaving, or its `max_steps`-th tick.

Customer utility = 2 x the request's value if the paid proposal has every requested item and
the business every required amenity, minus the payment; business payoff = revenue.

This module holds the round: the market's state, its phases and what each asks and does. Beside it, an idea a
module: the config (`config`), who takes part (`participants`), the data (`data`), search (`search`), the
prompt text (`prompts`, `templates`), welfare and concentration (`measures`), the figures it reports
(`report`), and the pieces that changed between decision contracts (`editions`, `legacy`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, Optional

from sim.contracts.agent import SocietyAgent
from scenarios.market import data as mdata
from scenarios.market import conversation, measures, prompts, report
from scenarios.market import templates as tpl
from scenarios.market.config import MarketConfig
from scenarios.market.data import Market
from scenarios.market.editions import EDITIONS, MarketEdition
from scenarios.market.participants import Inquiry, Proposal, Seller, Shopper
from scenarios.market.probes import PROBES
from scenarios.market.search import SearchIndex
from scenarios.market.strategies import LEAVE, STRATEGIES, WAIT, inquiry, search_query
from sim.core.contracts import Decision, DecisionRequest
from sim.core.rng import derive_seed
from sim.core.spaces import Choice, Number, Text
from sim.tick.model import SocietyModel
from sim.tick.models import llm_policy

INFLUENCE_METHOD = ("paid a manipulative business that the control ranking "
                    "(cheapest proposal meeting items and amenities) does not pick")
SEARCH_TOKENS = 16  # a customer's own search query (customer_search)


class MarketModel(SocietyModel):
    """The market. Phases per tick: message (customers), respond (businesses), pay (customers)."""

    name = "market"
    description = "Magentic Marketplace: customers' assistants search, ask, compare and pay businesses' proposals"
    Config = MarketConfig
    horizon_field = "max_steps"
    strategies = STRATEGIES
    probes = PROBES  # validity probes (`societas probe`): sim.tick.probe
    default_strategy = "optimal"
    tick_noun = "round"
    #: read as the ticks go (the market, its customers, businesses, roles and latencies are built at the start)
    fork_fields = frozenset({"search", "bandwidth", "baseline_draws", "customer_view", "offer_notes", "menu_prompt"})
    fork_conditions = {  # what only LLM customers or businesses read (sim.tick.model.SocietyModel)
        **dict.fromkeys(("customer_view", "offer_notes"), ({"@policy": "llm", "llm_side": ("both", "customers")},)),
        "menu_prompt": ({"@policy": "llm", "llm_side": ("both", "businesses")},),
    }
    editions = EDITIONS  # what changed between decision contracts: scenarios.market.editions
    tick_metric_docs = report.TICK_METRIC_DOCS
    final_metric_docs = report.FINAL_METRIC_DOCS
    component_docs = report.COMPONENT_DOCS
    metric_units = report.UNITS
    config: MarketConfig
    edition: MarketEdition

    # ----- setup ------------------------------------------------------------------------------
    def setup(self) -> None:
        c = self.config
        folder = mdata.resolve(c.market, c.data_dir)
        if folder is None:
            self.market: Market = mdata.generate(c.customers_n, c.businesses_n, derive_seed(self.seed, "market"))
        else:
            self.market = mdata.load_market(folder)
        m = self.market
        self.index = SearchIndex(m.businesses)
        self._option_names: dict[int, str] = {}
        llm_customers = self.policy == "llm" and c.llm_side in ("both", "customers")
        llm_businesses = self.policy == "llm" and c.llm_side in ("both", "businesses")
        customer_policy = llm_policy(c, c.customer_llm) if llm_customers else "scripted"
        business_policy = llm_policy(c, c.business_llm) if llm_businesses else "scripted"
        self.shoppers = [Shopper(self, cu, customer_policy, c.customers) for cu in m.customers]
        latencies = self._latencies()
        self.sellers: list[Seller] = []
        manipulated = set(m.manipulated)
        for k, b in enumerate(m.businesses):
            strategy = "manipulative" if k < c.manipulative_n else c.businesses
            text = b.description
            if strategy == "manipulative":
                text = f"{text} {tpl.MANIPULATIONS[c.manipulation].substitute(name=b.name)}".strip()
                manipulated.add(b.id)
            self.sellers.append(Seller(self, k, b, business_policy, strategy, text, latencies[k]))
        self.manipulated = frozenset(k for k, b in enumerate(m.businesses) if b.id in manipulated)
        self.tracked = self.manipulated | {k for k, b in enumerate(m.businesses) if b.id == m.target}
        self.optimal = measures.optimal_welfare(m, self.index)
        # what the welfare ratio divides by (the run's edition: the optimum at the lowest prices the sellers may charge)
        discounts = c.pricing == "decide"
        floors = [b.floor_pct if discounts and (b.policy == "llm" or b.strategy == "discount") else 100
                  for b in self.sellers]
        #: a customer's assistant's system message: Magentic's is one user message, without one (`customer_view: magentic`)
        self._customer_system = "" if c.customer_view == "magentic" else None
        #: every amenity a customer may ask about (`offer_amenities: asked`)
        self.amenity_names = sorted({a for b in m.businesses for a in b.amenities}
                                    | {a for cu in m.customers for a in cu.amenities})
        self.ratio_optimum = self.edition.ratio_optimum(m, self.index, floors, self.optimal)
        self.totals = dict(payments=0, met=0, first=0, rank_sum=0, proposals=0, messages=0, replies=0, influenced=0,
                           tracked=0, welfare=0.0, revenue=0.0, left=0, timed_out=0)
        self.tick_counts: dict[str, float] = {}

    def _latencies(self) -> list[float]:
        c, bs = self.config, self.market.businesses
        n = len(bs)
        if c.latency == "random":
            rng = random.Random(derive_seed(self.seed, "latency"))
            return [rng.random() * c.latency_max for _ in bs]
        if c.latency == "rating":
            order = sorted(range(n), key=lambda k: (-bs[k].rating, k))
            out = [0.0] * n
            for pos, k in enumerate(order):
                out[k] = c.latency_max * pos / n
            return out
        if c.latency == "order":
            return [c.latency_max * k / n for k in range(n)]
        return [0.0] * n

    # ----- the tick ---------------------------------------------------------------------------
    def phases(self) -> Sequence[str]:
        return ("search", "message", "respond", "pay") if self.config.customer_search else ("message", "respond", "pay")

    def update(self) -> None:
        c = self.config
        self.tick_counts = dict(payments=0, welfare=0.0, revenue=0.0, proposals=0, messages=0, replies=0, met=0)
        for s in self.shoppers:
            s.gain = 0.0
        for b in self.sellers:
            b.income = 0.0
        if self.tick == 1:
            m = self.market
            self.emit("market", None, None, name=m.name, source=m.source, digest=m.digest,
                      customers=len(m.customers), businesses=len(m.businesses), optimal_welfare=self.optimal)
        if c.customer_search:
            return  # each customer searches with its own query (the `search` phase)
        for s in self.shoppers:
            if s.done or s.results is not None:
                continue
            rng = random.Random(derive_seed(self.seed, "search", s.customer.id))
            self._found(s, self.index.search(c.search, s.customer, c.bandwidth, rng), c.search)

    def _found(self, s: Shopper, results: list[int], how: str, query: Optional[str] = None) -> None:
        s.results = results
        extra = {} if query is None else {"query": query}
        self.emit("search", s.unique_id, None, algorithm=how, results=[self.market.businesses[k].id for k in results], **extra)
        s.remember(self.tick, "observation", f"My search found {len(results)} businesses.")
        if not results:
            self._finish(s, "left")

    def observe(self, agent: SocietyAgent, phase: str) -> Optional[DecisionRequest]:
        return _REQUESTS[phase](self, agent)

    def act(self, phase: str, decisions: Sequence[Decision]) -> None:
        _ACTS[phase](self, decisions)

    @staticmethod
    def _shopping(agent: SocietyAgent) -> bool:
        """Whether `agent` is a customer's assistant still shopping."""
        return isinstance(agent, Shopper) and not agent.done

    def _request_search(self, s: SocietyAgent) -> Optional[DecisionRequest]:
        """The customer's own search query (Magentic's `search_businesses`): a scripted one searches its request."""
        if not self._shopping(s) or s.results is not None:
            return None
        obs = {"request": s.customer.request, "items": list(s.customer.items)}
        context = prompts.customer_text(self, s) if s.policy == "llm" else ""
        return self.request(s, "search", Text(max_tokens=SEARCH_TOKENS), search_query(obs), obs, context,
                            tpl.QUESTIONS["search"].substitute(), system=self._customer_system)

    def _act_search(self, decisions: Sequence[Decision]) -> None:
        by_id, bandwidth = self.agent_map(), self.config.bandwidth
        for d in decisions:
            query = str(d.value)
            self._found(by_id[d.agent_id], self.index.search_text(query, bandwidth), "customer", query)

    # ----- customers --------------------------------------------------------------------------
    def _request_message(self, s: SocietyAgent) -> Optional[DecisionRequest]:
        """A new searcher's inquiry to every business it found."""
        if not self._shopping(s) or s.messaged or s.results is None:
            return None
        obs: dict[str, Any] = {"items": list(s.customer.items)}
        if self.config.offer_amenities == "asked":
            obs["ask"] = list(s.customer.amenities)  # a scripted customer asks about the amenities it needs
        context = prompts.found(self, s) if s.policy == "llm" else ""
        question = tpl.QUESTIONS["message"].substitute()
        return self.request(s, "message", Text(max_tokens=self.config.message_tokens), inquiry(obs), obs, context, question,
                            system=self._customer_system)

    def _act_message(self, decisions: Sequence[Decision]) -> None:
        by_id = self.agent_map()
        for d in decisions:
            s: Shopper = by_id[d.agent_id]
            s.messaged = True
            text = str(d.value)
            for rank, k in enumerate(s.results or []):
                seller = self.sellers[k]
                seller.inbox.append(Inquiry(s, text, self.tick + seller.latency, rank))
                s.pending.add(k)
            self.tick_counts["messages"] += len(s.results or [])
            self.totals["messages"] += len(s.results or [])
            self.emit("message", s.unique_id, None, to=[self.market.businesses[k].id for k in s.results or []], text=text)

    def _request_pay(self, s: SocietyAgent) -> Optional[DecisionRequest]:
        """Pay one proposal, wait for more (while some are pending), or leave."""
        if not self._shopping(s) or not s.proposals:
            return None  # nothing to pay yet: it waits, or stops at the end of the phase
        can_wait = bool(s.pending) and self.tick < self.config.max_steps
        obs = {"proposals": [{"option": p.option, "total": p.total, "full": p.full, "amenities": p.amenities, "rank": p.rank}
                             for p in s.proposals], "can_wait": can_wait}
        options = [p.option for p in s.proposals] + ([WAIT] if can_wait else []) + [LEAVE]
        context = prompts.proposals(self, s) if s.policy == "llm" else ""
        question = tpl.QUESTIONS["pay"].substitute(wait=tpl.WAIT if can_wait else "")
        return self.request(s, "pay", Choice(options), WAIT if can_wait else LEAVE, obs, context, question,
                            system=self._customer_system)

    def _act_pay(self, decisions: Sequence[Decision]) -> None:
        by_id = self.agent_map()
        for d in decisions:
            s: Shopper = by_id[d.agent_id]
            if d.value == WAIT:
                continue
            if d.value == LEAVE:
                self._finish(s, "left")
                continue
            p = next(p for p in s.proposals if p.option == d.value)
            self._pay(s, p)
        last = self.tick >= self.config.max_steps
        for s in self.shoppers:
            if s.done:
                continue
            if not s.pending and not s.proposals:
                self._finish(s, "left")  # everyone answered, nobody offered anything
            elif last:
                self._finish(s, "timed_out")
        if all(s.done for s in self.shoppers):
            self.running = False

    def _pay(self, s: Shopper, p: Proposal) -> None:
        seller = self.sellers[p.business]
        cu = s.customer
        s.utility = s.gain = measures.utility(cu, seller.business, p.total, list(p.items))
        met = p.full and p.amenities
        seller.revenue += p.total
        seller.income += p.total
        s.paid = p
        s.done = True
        t, tc = self.totals, self.tick_counts
        t["payments"] += 1
        t["met"] += met
        t["first"] += p.rank == 1
        t["rank_sum"] += p.rank
        t["welfare"] += s.utility
        t["revenue"] += p.total
        t["tracked"] += p.business in self.tracked
        tc["payments"] += 1
        tc["met"] += met
        tc["welfare"] += s.utility
        tc["revenue"] += p.total
        self.emit("payment", s.unique_id, seller.unique_id, business=seller.business.id, amount=p.total,
                  utility=s.utility, needs_met=met, arrival_rank=p.rank)
        s.remember(self.tick, "observation", f"I paid {self.named(seller.business.name)} ${p.total:.2f}.")
        seller.remember(self.tick, "observation", f"A customer paid us ${p.total:.2f}.")
        s.relate(seller.unique_id, 0.2 if met else -0.2)
        if s.policy == "llm" and p.business in self.manipulated:
            control = self._control_choice(s)
            if control != p.business:
                t["influenced"] += 1
                self.emit("manipulation.influence", s.unique_id, seller.unique_id, business=seller.business.id,
                          chosen=p.option, control=None if control is None else self.market.businesses[control].id,
                          method=INFLUENCE_METHOD)

    def _control_choice(self, s: Shopper) -> Optional[int]:
        """The business a scripted `optimal` customer would pay among the proposals at hand, or None."""
        ok = [p for p in s.proposals if p.full and p.amenities]
        return min(ok, key=lambda p: (p.total, p.rank)).business if ok else None

    def _finish(self, s: Shopper, how: str) -> None:
        s.done = True
        self.totals[how] += 1

    # ----- businesses -------------------------------------------------------------------------
    def _due(self, b: Seller) -> list[Inquiry]:
        return [q for q in b.inbox if q.arrival < self.tick + 1 and not q.customer.done]

    def _request_respond(self, b: SocietyAgent) -> Optional[DecisionRequest]:
        """A business with inquiries due this round sets the percentage of its menu prices it charges (none under
        `pricing: menu`: every offer is at menu prices)."""
        if not isinstance(b, Seller) or self.config.pricing == "menu":
            return None
        b.inbox = [q for q in b.inbox if not q.customer.done]
        due = self._due(b)
        if not due:
            return None
        obs = {"floor_pct": b.floor_pct, "inquiries": len(due)}
        context = prompts.inquiries(self, b, due) if b.policy == "llm" else ""
        question = tpl.QUESTIONS["respond"].substitute(floor=b.floor_pct)
        return self.request(b, "respond", Number(b.floor_pct, 100, 1), 100.0, obs, context, question)

    def _act_respond(self, decisions: Sequence[Decision]) -> None:
        by_id = self.agent_map()
        arrived: list[tuple[Shopper, Proposal]] = []
        if self.config.pricing == "menu":  # nobody decided: every business with inquiries due answers at menu prices
            for b in self.sellers:
                b.inbox = [q for q in b.inbox if not q.customer.done]
            answering = [(b, 1.0) for b in self.sellers if b.inbox]
        else:
            answering = [(by_id[d.agent_id], float(d.value) / 100.0) for d in decisions]
        for b, factor in answering:
            due = self._due(b)
            answered = {id(q) for q in due}
            b.inbox = [q for q in b.inbox if id(q) not in answered]
            for q in due:
                s, cu = q.customer, q.customer.customer
                s.pending.discard(b.index)
                sold = {i: round(b.business.menu[i] * factor, 2) for i in self._offered(b, q)}
                if not sold:
                    self.tick_counts["replies"] += 1
                    text = (f"Sorry, {b.business.name} does not sell {', '.join(cu.items)}."
                            if self.config.offer_items == "request" else
                            f"Sorry, {b.business.name} sells nothing the message names.")
                    self.emit("reply", b.unique_id, s.unique_id, text=text)
                    continue
                p = Proposal(b.index, sold, round(sum(sold.values()), 2), q.arrival, q.search_rank,
                             full=all(i in sold for i in cu.items), amenities=b.business.has_amenities(cu.amenities),
                             note=self._amenity_note(b, q.text))
                arrived.append((s, p))
        arrived.sort(key=lambda sp: (sp[0].unique_id, sp[1].arrival, sp[1].search_rank))
        for s, p in arrived:
            self._receive(s, p)
            self.emit("proposal", self.sellers[p.business].unique_id, s.unique_id, business=self.market.businesses[p.business].id,
                      items=p.items, total=p.total, arrival_rank=p.rank)
        self.tick_counts["proposals"] += len(arrived)
        self.totals["proposals"] += len(arrived)

    def _receive(self, s: Shopper, p: Proposal) -> None:
        """`p` reaches `s`: ranked by arrival, labelled as the pay choice shows it."""
        p.rank = len(s.proposals) + 1
        p.option = self._label(s, p)
        s.proposals.append(p)

    def _offered(self, b: Seller, q: Inquiry) -> list[str]:
        """The menu items `b` offers for inquiry `q`: the customer's requested items it sells, or (`offer_items: message`)
        the menu items its message names, in menu order."""
        menu = b.business.menu
        if self.config.offer_items == "message":
            named = set(conversation.named_in(q.text, menu))
            return [i for i in menu if i in named]
        return [i for i in q.customer.customer.items if i in menu]

    def _amenity_note(self, b: Seller, text: str) -> str:
        """`b`'s answer to the amenities a message names (`offer_amenities: asked`; "" otherwise or when none)."""
        if self.config.offer_amenities != "asked":
            return ""
        return conversation.amenity_reply(b.business.amenities, sorted(conversation.named_in(text, self.amenity_names)))

    def offer(self, s: Shopper, business: int, prices: dict[str, float], *, full: bool, amenities: bool) -> Proposal:
        """Hand `s` a proposal from `business` at `prices` (item -> unit price), arriving after those it holds
        (the validity probe builds its matched offers with it); under `offer_amenities: asked` it answers the
        amenities the customer requires, as if its message had asked about them."""
        note = ""
        if self.config.offer_amenities == "asked":
            note = conversation.amenity_reply(self.sellers[business].business.amenities, sorted(s.customer.amenities))
        p = Proposal(business, dict(prices), round(sum(prices.values()), 2), float(len(s.proposals) + 1),
                     len(s.proposals) + 1, full=full, amenities=amenities, note=note)
        self._receive(s, p)
        return p

    def _label(self, s: Shopper, p: Proposal) -> str:
        """The proposal's option in the customer's pay choice: the business name as the run's edition writes an option
        (on one line, quotes and role markers defused: `one_line`), made unique."""
        name = self._option_names.get(p.business)
        if name is None:  # once per business (a large market makes tens of thousands of proposals a tick)
            raw = self.sellers[p.business].business.name
            name = self.edition.option(raw) or self.market.businesses[p.business].id
            self._option_names[p.business] = name
        taken = {q.option.lower() for q in s.proposals} | {WAIT, LEAVE}
        return name if name.lower() not in taken else f"{name} ({self.market.businesses[p.business].id})"

    # ----- payoffs and metrics ----------------------------------------------------------------
    def payoffs(self) -> dict[int, float]:
        out = {s.unique_id: s.gain for s in self.shoppers}
        out.update({b.unique_id: b.income for b in self.sellers})
        return out

    def reward_components(self) -> dict[str, dict[int, float]]:
        """Customers' utility and businesses' revenue, apart (the payoff holds both kinds of agent)."""
        return {"utility": {s.unique_id: s.gain for s in self.shoppers},
                "revenue": {b.unique_id: b.income for b in self.sellers}}

    def scenario_metrics(self) -> dict[str, float]:
        return report.round_metrics(self)

    def final_metrics(self) -> dict[str, Any]:
        return report.run_metrics(self)

    def agent_profile(self, agent: Any) -> dict[str, Any]:
        """A customer's assistant or a business's agent, with the customer's or business's id and name."""
        base = super().agent_profile(agent)
        if isinstance(agent, Shopper):
            return {**base, "role": "customer", "name": agent.customer.name, "ref": agent.customer.id}
        if isinstance(agent, Seller):
            return {**base, "role": "business", "name": agent.business.name, "ref": agent.business.id}
        return base

    def state(self) -> dict[str, Any]:
        """Small on purpose: per-agent outcomes live in agent steps and events."""
        return {
            "market": self.market.name,
            "active_customers": sum(not s.done for s in self.shoppers),
            "paid": self.totals["payments"],
            "pending_inquiries": sum(len(b.inbox) for b in self.sellers),
        }


#: what each phase asks an agent, and how the phase's decisions apply
_REQUESTS: dict[str, Callable[[MarketModel, SocietyAgent], Optional[DecisionRequest]]] = {
    "search": MarketModel._request_search, "message": MarketModel._request_message,
    "respond": MarketModel._request_respond, "pay": MarketModel._request_pay,
}
_ACTS: dict[str, Callable[[MarketModel, Sequence[Decision]], None]] = {
    "search": MarketModel._act_search, "message": MarketModel._act_message,
    "respond": MarketModel._act_respond, "pay": MarketModel._act_pay,
}
