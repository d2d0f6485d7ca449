"""The market's paper protocol (`scenarios/market/configs/magentic.yaml`) against Magentic Marketplace's own code.

Every prompt of a run is rendered as the run sends it (a recording backend stands in for the LLM: these tests read
prompts and what the world does with a message, not a model's answers) and checked against strings quoted from
Magentic's code, each with its repository, commit, file and line; each quote must also be on docs/protocols.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.scripted import ScriptedBackend
from scenarios import get_scenario
from scenarios.market import prompts as market_prompts
from scenarios.market.conversation import amenity_reply, named_in
from scenarios.market.participants import Inquiry
from sim.core.contracts import Decision
from runner.config import build_spec
from sim.tick.broker import DecisionBroker
from sim.tick.probe import enter_first_tick
from tests.recorder import Recorder

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "protocols.md").read_text()
CONFIG = "scenarios/market/configs/magentic.yaml"

REPO, COMMIT = "microsoft/multi-agent-marketplace", "fdaf34d1696e301a6df20417b78be4ab1ff18c02"
AGENTS = "packages/magentic-marketplace/src/magentic_marketplace/marketplace/agents/"
#: (where in our prompts, Magentic's string, its file under AGENTS and line at COMMIT)
QUOTES = [
    ("customer", "You are an autonomous agent working for customer ", "customer/prompts.py", 59),
    ("customer", "IMPORTANT: You do NOT have access to the customer directly. You must fulfill their request using only "
                 "the tools available to you.", "customer/prompts.py", 63),
    ("customer", "- search_businesses(search_query, search_page): Find businesses matching criteria", "customer/prompts.py",
     66),
    ("customer", '3. **Inquire** - Contact ALL promising businesses with "text" messages for details', "customer/prompts.py",
     74),
    ("customer", '4. **Wait for Proposals** - Services will send "order_proposal" messages with specific offers',
     "customer/prompts.py", 75),
    ("customer", "5. **Compare** - Compare all proposals for price/quality", "customer/prompts.py", 76),
    ("customer", "- Must complete the purchase by paying for a proposal. Do not wait for the customer - you ARE acting for "
                 "them.", "customer/prompts.py", 84),
    # the business's instructions this scenario follows by rule (no business request under pricing: menu)
    ("business, by rule", "ONLY tell potential customers what you have on the menu with CORRECT PRICES.",
     "business/prompts.py", 97),
    ("business, by rule", "unit_price from your menu", "business/prompts.py", 128),
    ("business, by rule", '1. If customer wants to purchase specific items: use action_type="order_proposal"',
     "business/prompts.py", 134),
    ("business, by rule", '2. For general inquiries: use action_type="text"', "business/prompts.py", 135),
    ("not rendered: the step prompt", "What action should you take?", "customer/prompts.py", 127),
]


def _model(*sets: str, seed: int = 0, recorder=None, config: str = CONFIG):
    cls = get_scenario("market")
    spec = build_spec("market", config_file=config, sets=["customers_n=6", "businesses_n=18", *sets])
    backends = {"scripted": ScriptedBackend(cls.strategies)}
    if recorder is not None:
        backends["llm"] = recorder
    return cls(cls.Config.model_validate(spec.config), seed=seed, policy="llm" if recorder else "scripted",
               broker=DecisionBroker(backends))


def _run(*sets: str, seed: int = 0):
    recorder = Recorder(ScriptedBackend(get_scenario("market").strategies).decide_batch)
    model = _model(*sets, seed=seed, recorder=recorder)
    for _ in range(model.config.max_steps):
        if not model.running:
            break
        model.step()
    return model, recorder.seen


@pytest.fixture(scope="module")
def prompts():
    return _run()[1]


def test_every_quote_is_on_the_page_with_the_commit():
    """docs/protocols.md quotes every string this file checks, and names the commit it was read at."""
    assert REPO in PAGE and COMMIT[:8] in PAGE
    missing = [q for _, q, _, _ in QUOTES if q not in PAGE]
    assert not missing, missing


def test_every_customer_prompt_opens_with_magentics_assistant_text(prompts):
    """Search, message and pay: the assistant reads Magentic's own text with its customer's request (quoted), and
    neither the item values nor the utility rule."""
    phases = {r.phase for r, _ in prompts}
    assert phases == {"search", "message", "pay"}  # no business is asked anything: offers are at menu prices
    for r, m in prompts:
        assert [x["role"] for x in m] == ["user"]  # Magentic sends one user message, no system message
        user = m[0]["content"]
        for where, quote, _, _ in QUOTES:
            if where == "customer":
                assert quote in user, (r.phase, quote)
        assert "They have the following request: \"" in user
        assert "worth $" not in user and "twice the value" not in user


def test_no_prompt_holds_what_magentic_does_not_show(prompts):
    """No offer lists its business's amenities, no per-round reward line, no discount or floor, no missing-item note,
    and the platform's step prompt of Magentic's action loop is not asked (the phases ask one action each)."""
    for r, m in prompts:
        user = m[-1]["content"]
        for absent in ("Amenities:", "Last round", "discount", "floor", "(missing:", "What action should you take?"):
            assert absent not in user, (r.phase, absent)


def test_an_offer_holds_the_items_the_message_names_at_menu_prices():
    """A business reads the message, not the request: a message naming one of two requested items gets an offer of
    that item alone, at its menu price; a message naming no menu item gets a text reply and no offer."""
    model = _model()
    enter_first_tick(model)
    shopper = next(s for s in model.shoppers if len(s.customer.items) >= 2)
    first, second = list(shopper.customer.items)[:2]
    seller = next(b for b in model.sellers if first in b.business.menu and second in b.business.menu)
    shopper.results, shopper.messaged = [seller.index], True
    seller.inbox = [Inquiry(shopper, f"Hi, how much is one {first}?", 0.0, 0)]
    model.act("respond", [])
    (offer,) = shopper.proposals
    assert offer.items == {first: seller.business.menu[first]} and not offer.full  # the other item was not asked for
    assert offer.total == seller.business.menu[first] and offer.note == ""  # no amenity asked about, none told
    other = next(s for s in model.shoppers if s is not shopper)
    other.results, other.messaged = [seller.index], True
    seller.inbox = [Inquiry(other, "Hello, could you send me an offer for the items?", 0.0, 0)]
    model.act("respond", [])
    assert other.proposals == [] and seller.index not in other.pending


def test_a_business_answers_the_amenities_asked_and_nothing_else():
    """An amenity the message names is answered Yes or No from the business's data; the others are not mentioned,
    and the customer's pay prompt quotes the answer beside the offer."""
    model = _model()
    enter_first_tick(model)
    shopper = model.shoppers[0]
    item = next(iter(shopper.customer.items))
    seller = next(b for b in model.sellers if item in b.business.menu)
    has = sorted(a for a, v in seller.business.amenities.items() if v)
    lacks = sorted(a for a in model.amenity_names if not seller.business.amenities.get(a, False))
    assert has and lacks
    shopper.results, shopper.messaged = [seller.index], True
    seller.inbox = [Inquiry(shopper, f"Please offer {item}. Do you have {has[0].lower()} and {lacks[0]}?", 0.0, 0)]
    model.act("respond", [])
    (offer,) = shopper.proposals
    assert offer.note == "; ".join(sorted([f"{has[0]}: Yes", f"{lacks[0]}: No"], key=lambda x: x.split(":")[0]))
    user = market_prompts.proposals(model, shopper)  # what an LLM assistant's pay prompt shows
    assert f'Reply: "{offer.note}"' in user and "Amenities" not in user
    assert all(a not in offer.note for a in has[1:] + lacks[1:])


def test_matching_reads_whole_words_and_the_longest_name():
    """"Churros" inside "Smoky Churros" is one item; a name must appear as whole words, case and punctuation aside."""
    assert named_in("One SMOKY churros, please!", ["Churros", "Smoky Churros"]) == ["Smoky Churros"]
    assert named_in("smoky churros and churros", ["Churros", "Smoky Churros"]) == ["Smoky Churros", "Churros"]
    assert named_in("a burritos bowl", ["Burrito", "Burrito Bowl"]) == []
    assert named_in("Do you have children's menu?", ["Children's Menu"]) == ["Children's Menu"]
    assert amenity_reply({"Live Music": True}, ["Live Music", "Free Wifi"]) == "Live Music: Yes; Free Wifi: No"


def test_scripted_customers_name_their_items_so_message_offers_equal_request_offers():
    """A scripted customer's message names its items (and asks about its amenities): reading the message gives the
    offers reading the request gave, so the scripted market's welfare is the same either way."""
    figures = []
    for items in ("message", "request"):
        model = _model(f"offer_items={items}", "policy=scripted")
        for _ in range(model.config.max_steps):
            if not model.running:
                break
            model.step()
        figures.append({k: model.final_metrics()[k] for k in ("welfare", "payment_rate")})
    assert figures[0] == figures[1] and figures[0]["payment_rate"] > 0


def test_the_probes_offers_answer_every_required_amenity_yes_in_every_seed():
    """Under magentic.yaml the probe's three complete offers come from businesses that have every required amenity,
    and each offer's reply says so (the customer learns amenities only from such replies)."""
    from scenarios.market.probes import CHOICE_BY_PRICE

    cls = get_scenario("market")
    spec = build_spec("market", config_file=CONFIG)
    config = cls.Config.model_validate({**spec.config, **CHOICE_BY_PRICE.config})
    asked = 0
    for seed in range(10):
        model = cls(config, seed=seed, broker=DecisionBroker({}), policy="llm")
        request = CHOICE_BY_PRICE.situate(model, 1.0)
        shopper = next(s for s in model.shoppers if s.proposals)
        required = shopper.customer.amenities
        assert len(shopper.proposals) == 3
        asked += bool(required)
        for p in shopper.proposals:
            assert model.sellers[p.business].business.has_amenities(required), seed
            assert p.note == "; ".join(f"{a}: Yes" for a in sorted(required)), seed  # (none required: nothing asked)
            assert (f'Reply: "{p.note}"' in request.context) is bool(required)
        assert "Amenities:" not in request.context
    assert asked >= 5


def test_menu_pricing_refuses_a_discounting_business_and_leaves_the_ratio_at_menu_prices():
    """`pricing: menu` has nobody discount: a config asking for discounting businesses is refused, and the welfare
    ratio divides by the optimum at menu prices."""
    cls = get_scenario("market")
    with pytest.raises(ValueError, match="pricing=decide"):
        cls.Config(pricing="menu", businesses="discount")
    model = _model(recorder=Recorder(ScriptedBackend(cls.strategies).decide_batch))
    assert model.ratio_optimum == model.optimal


@pytest.mark.parametrize("customer_view", ["values", "request"])
def test_the_earlier_views_and_offers_are_unchanged(customer_view):
    """A config that sets none of the new switches renders as before: the platform's rules, amenities listed, the
    requested items offered whatever the message says."""
    cls = get_scenario("market")
    model = cls(cls.Config(customers_n=4, businesses_n=12, customer_view=customer_view), seed=0, policy="llm",
                broker=DecisionBroker({}))
    enter_first_tick(model)
    shopper = model.shoppers[0]
    seller = next(b for b in model.sellers if all(i in b.business.menu for i in shopper.customer.items))
    seller.inbox = [Inquiry(shopper, "Hello, could you send me an offer for the items?", 0.0, 0)]
    model.act("respond", [Decision(seller.unique_id, "respond", 100.0, "scripted")])
    (offer,) = shopper.proposals
    assert set(offer.items) == set(shopper.customer.items) and offer.full
    context = market_prompts.proposals(model, shopper)
    assert "Amenities:" in context and "You are a customer's assistant agent" in context
