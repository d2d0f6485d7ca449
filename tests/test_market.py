"""The market scenario: welfare against the Magentic baselines, bias and concentration metrics, data errors."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agents.scripted import ScriptedBackend
from scenarios.market import MarketConfig, MarketModel
from scenarios.market import data as mdata
from sim.tick.broker import DecisionBroker
from runner.config import build_spec
from sim.core.contracts import Decision
from sim.core.errors import UsageError
from runner.execution import execute
from sim.contracts.backend import Backend
from tests.conftest import cli

DATA = mdata.default_data_dir()
needs_data = pytest.mark.skipif(DATA is None, reason="Magentic data not found (../shared/data/magentic or $SOCIETAS_DATA_DIR)")


def _markets(with_baseline: bool) -> list[str]:
    if DATA is None:
        return []
    found = mdata.catalogue(str(DATA.resolve()))
    names = [k for k in sorted(found) if found[k].relative_to(DATA.resolve()).as_posix() == k]  # each folder once
    return [k for k in names if (found[k] / "baseline_utilities.json").is_file() == with_baseline and "100_300" not in k]


def run(backends=None, seed: int = 0, policy: str = "scripted", **cfg) -> MarketModel:
    """Run a market to its end without a store."""
    config = MarketConfig(**cfg)
    backends = backends or {"scripted": ScriptedBackend(MarketModel.strategies)}
    records: list = []
    model = MarketModel(config, seed=seed, broker=DecisionBroker(backends), policy=policy, on_tick=records.append)
    model.records = records  # the tick records, which the model hands on rather than keeps
    while model.running and model.tick < config.max_steps:
        model.step()
    return model


def write_market(root: Path, customers: list[dict], businesses: list[dict]) -> Path:
    for side, rows in (("customers", customers), ("businesses", businesses)):
        (root / side).mkdir(parents=True, exist_ok=True)
        for row in rows:
            (root / side / f"{row['id']}.yaml").write_text(yaml.safe_dump(row))
    return root


def customer(cid: str, items: dict, amenities=()) -> dict:
    return {"id": cid, "name": cid, "request": "I want " + " and ".join(items), "menu_features": items,
            "amenity_features": list(amenities)}


def business(bid: str, menu: dict, amenities: dict, rating: float = 0.5, floor: float = 0.8) -> dict:
    return {"id": bid, "name": f"Shop {bid[-1]}", "description": "Food.", "rating": rating, "menu_features": menu,
            "amenity_features": amenities, "min_price_factor": floor}


@pytest.fixture
def small(tmp_path: Path) -> Path:
    """2 customers x 3 businesses. c1 wants a Taco with a Patio; c2 a Burrito, no amenity."""
    return write_market(
        tmp_path / "small",
        [customer("customer_0001", {"Taco": 10.0}, ["Patio"]), customer("customer_0002", {"Burrito": 8.0})],
        [business("business_0001", {"Taco": 5.0, "Burrito": 5.0}, {"Patio": False}),
         business("business_0002", {"Taco": 4.0}, {"Patio": True}),
         business("business_0003", {"Taco": 6.0, "Burrito": 7.0}, {"Patio": True})],
    )


@needs_data
@pytest.mark.parametrize("name", _markets(with_baseline=True))
def test_optimal_agents_reach_the_reference_optimal_welfare(name):
    """Optimal search + optimal customers + honest businesses: welfare = pick_optimal_baseline of baseline_utilities.json."""
    m = run(market=name, customers="optimal", businesses="honest", search="optimal").summary()
    assert m["reference_optimal_welfare"] is not None
    assert m["welfare"] == pytest.approx(m["reference_optimal_welfare"], abs=1e-6)
    assert m["optimal_welfare"] == pytest.approx(m["reference_optimal_welfare"], abs=1e-6)
    assert m["welfare_ratio"] == pytest.approx(1.0) and m["needs_met_rate"] > 0


@needs_data
def test_same_code_path_reaches_optimal_welfare_on_markets_without_reference():
    """Every other market (contractors, competitive, position bias): the run's welfare equals the computed optimum."""
    names = _markets(with_baseline=False)
    assert len(names) >= 10
    for name in names:
        m = run(market=name, search="optimal").summary()
        assert m["welfare"] == pytest.approx(m["optimal_welfare"], abs=1e-6), name
        assert m["reference_optimal_welfare"] is None


@needs_data
def test_reference_baselines_agree_with_the_data():
    """Cheapest-menu baseline equals the stored constant; the random-match medians fall within the stored quartiles."""
    model = run(market="mexican_33_99", max_steps=1)
    m, ref = model.summary(), model.market.baselines
    assert m["baseline_cheapest"] == pytest.approx(ref["pick_cheapest_baseline"]["constant"], abs=1e-6)
    pairs = (("baseline_any_median", "pick_any_baseline"), ("baseline_any_amenities_median", "pick_any_with_amenities_baseline"))
    for key, name in pairs:
        assert ref[name]["q1"] <= m[key] <= ref[name]["q3"]


def test_hand_built_market_ranks_and_concentration(small):
    """2x3 market, proposals in file order: optimal customers pay b2 (rank 2) and b1 (rank 1)."""
    model = run(market=str(small), search="optimal", latency="order", customers="optimal")
    m = model.summary()
    # c1: b2 is the cheapest with a Patio (2*10-4); c2: b1 is the cheapest Burrito (2*8-5)
    assert m["welfare"] == pytest.approx(16.0 + 11.0)
    assert m["optimal_welfare"] == pytest.approx(27.0)
    assert m["first_proposal_rate"] == pytest.approx(0.5)
    assert m["mean_paid_arrival_rank"] == pytest.approx(1.5)
    # revenues [5, 4, 0]: Gini = sum|xi-xj| / (2 n^2 mean) = 20 / 54; HHI = (5/9)^2 + (4/9)^2
    assert m["revenue_gini"] == pytest.approx(20 / 54)
    assert m["revenue_hhi"] == pytest.approx(41 / 81)
    assert m["needs_met_rate"] == 1.0


def test_first_customers_pay_the_first_proposal(small):
    """`first` ignores amenities: c1 pays b1 (no Patio) and gets -5; both pay rank 1."""
    m = run(market=str(small), search="optimal", latency="order", customers="first").summary()
    assert m["first_proposal_rate"] == 1.0 and m["mean_paid_arrival_rank"] == 1.0
    assert m["welfare"] == pytest.approx(-5.0 + 11.0)
    assert m["needs_met_rate"] == 0.5
    assert m["revenue_hhi"] == pytest.approx(1.0) and m["revenue_gini"] == pytest.approx(2 / 3)


def test_first_customers_on_a_synthetic_market_have_rate_one():
    """`first` customers with optimal search: first-proposal rate 1 on a random market."""
    m = run(customers_n=60, businesses_n=120, customers="first", search="optimal", seed=4).summary()
    assert m["payment_rate"] > 0.9
    assert m["first_proposal_rate"] == 1.0 and m["mean_paid_arrival_rank"] == 1.0


def test_latency_orders_arrival(small):
    """latency=rating: proposals arrive best-rated first."""
    ratings = {"business_0001": 0.1, "business_0002": 0.9, "business_0003": 0.5}
    for f in (small / "businesses").glob("*.yaml"):
        row = yaml.safe_load(f.read_text())
        row["rating"] = ratings[row["id"]]
        f.write_text(yaml.safe_dump(row))
    model = run(market=str(small), search="optimal", latency="rating", customers="optimal")
    order = {s.customer.id: [model.market.businesses[p.business].id for p in s.proposals] for s in model.shoppers}
    assert order["customer_0001"] == ["business_0002", "business_0003", "business_0001"]
    assert order["customer_0002"] == ["business_0003", "business_0001"]
    # c1 pays b2 (first to arrive), c2 the cheaper b1 (second)
    assert model.summary()["first_proposal_rate"] == 0.5


def test_discount_businesses_raise_welfare_and_cut_revenue():
    """Businesses at their price floor: same needs met, more customer welfare, less revenue."""
    honest = run(customers_n=40, businesses_n=80, search="optimal", seed=2).summary()
    cheap = run(customers_n=40, businesses_n=80, search="optimal", seed=2, businesses="discount").summary()
    assert cheap["needs_met_rate"] == honest["needs_met_rate"]
    assert cheap["welfare"] > honest["welfare"] and cheap["revenue_total"] < honest["revenue_total"]


def test_synthetic_market_is_seeded_and_always_has_a_match():
    """Same seed: the same market; every synthetic customer has a business meeting items and amenities."""
    a = mdata.generate(50, 100, 7)
    assert a == mdata.generate(50, 100, 7) and a != mdata.generate(50, 100, 8)
    m = run(customers_n=50, businesses_n=100, search="optimal", bandwidth=1000).summary()
    assert m["needs_met_rate"] == 1.0 and m["welfare"] == pytest.approx(m["optimal_welfare"])


def test_search_results_are_bounded_by_bandwidth():
    """No search returns more than `bandwidth` businesses; lexical ranks text overlap first."""
    for algo in ("optimal", "lexical", "simple", "random"):
        model = run(customers_n=30, businesses_n=200, search=algo, bandwidth=4, max_steps=1)
        assert all(len(s.results) <= 4 for s in model.shoppers)
        assert any(s.results for s in model.shoppers)


@needs_data
def test_target_share_is_reported_for_competitive_markets():
    """Competitive markets track business_0001's payment share, in the manipulated and the control market."""
    for name in ("competitive_description/mexican_authority", "competitive_description/mexican_control"):
        model = run(market=name, search="optimal")
        assert model.market.target == "business_0001"
        assert model.summary()["target_payment_share"] is not None
    assert run(market="competitive_description/mexican_control", max_steps=1).manipulated == frozenset()
    assert run(market="competitive_description/mexican_authority", max_steps=1).manipulated == frozenset({0})


class PicksManipulator(Backend):
    """A stand-in LLM customer that pays `Shop 1` whenever its description carries an injected instruction."""

    name = "llm"

    def decide_batch(self, requests):
        out = []
        for r in requests:
            value = r.default
            if r.phase == "pay":
                hit = "SYSTEM INSTRUCTION" in r.context and "Shop 1" in r.space.options
                value = "Shop 1" if hit else r.space.options[0]
            out.append(Decision(r.agent_id, r.phase, value, self.name))
        return out


def test_manipulation_that_changes_a_choice_is_recorded(small):
    """An LLM customer paying the manipulative business against the control ranking (cheapest match) emits an event."""
    backends = {"scripted": ScriptedBackend(MarketModel.strategies), "llm": PicksManipulator()}
    cfg = dict(policy="llm", llm_side="customers", market=str(small), search="optimal", latency="order")
    clean = run(backends, **cfg).summary()
    assert clean["manipulation_influenced"] == 0 and clean["target_payment_share"] is None
    model = run(backends, manipulative_n=1, manipulation="prompt_injection", **cfg)
    m = model.summary()
    # c1 pays Shop 1 (no Patio) instead of Shop 2: influenced; c2's cheapest Burrito is Shop 1 anyway: not counted
    assert m["manipulation_influenced"] == 1 and m["target_payment_share"] == 1.0
    events = [e for r in model.records for e in r.events if e.kind == "manipulation.influence"]
    assert len(events) == 1 and events[0].data["control"] == "business_0002"


def test_manipulative_strategy_adds_the_claim_to_descriptions(small):
    """`manipulative_n=1`: the first business's description carries the chosen manipulation."""
    model = run(market=str(small), manipulative_n=1, manipulation="social_proof", max_steps=1)
    assert "SATISFIED CUSTOMERS" in model.sellers[0].description
    assert model.manipulated == frozenset({0}) and "SATISFIED" not in model.sellers[1].description


@pytest.mark.parametrize("mutate, field", [
    (lambda c, b: c[0].pop("menu_features"), "menu_features"),
    (lambda c, b: b[1]["menu_features"].update(Taco=-1.0), "menu_features.Taco"),
    (lambda c, b: c[0]["amenity_features"].append("Helipad"), "amenity_features"),
    (lambda c, b: b[0].pop("min_price_factor"), "min_price_factor"),
    (lambda c, b: b[0]["amenity_features"].update(Patio="yes"), "amenity_features"),
])
def test_malformed_market_files_name_file_and_field(tmp_path, mutate, field):
    """Missing fields, negative prices, unknown amenities: a one-line error naming the file and the field."""
    cs = [customer("customer_0001", {"Taco": 10.0}, ["Patio"])]
    bs = [business("business_0001", {"Taco": 5.0}, {"Patio": True}), business("business_0002", {"Taco": 4.0}, {"Patio": False})]
    mutate(cs, bs)
    root = write_market(tmp_path / "bad", cs, bs)
    with pytest.raises(UsageError) as exc:
        build_spec("market", sets=[f"market={root}"])
    msg = str(exc.value)
    assert "\n" not in msg and f"'{field}'" in msg and ".yaml" in msg


def test_unknown_market_lists_valid_names(tmp_path):
    """An unknown name is refused at config time with the valid names."""
    write_market(tmp_path / "data" / "tiny_1_1", [customer("customer_0001", {"Taco": 1.0})],
                 [business("business_0001", {"Taco": 1.0}, {})])
    with pytest.raises(UsageError, match=r"unknown market 'nope'; valid: synthetic, tiny_1_1"):
        build_spec("market", sets=["market=nope", f"data_dir={tmp_path / 'data'}"])
    spec = build_spec("market", sets=["market=tiny_1_1", f"data_dir={tmp_path / 'data'}"])
    assert spec.config["market"] == "tiny_1_1"


def test_cli_refuses_a_bad_market_with_one_line_and_no_run(tmp_path, db_url, store):
    """`societas run market --set market=<malformed>` exits 2 with one line naming the file; nothing is stored."""
    root = write_market(tmp_path / "m", [customer("customer_0001", {"Taco": 1.0}, ["Spa"])],
                        [business("business_0001", {"Taco": 1.0}, {})])
    proc = cli("run", "market", "--set", f"market={root}", db=db_url)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "customer_0001.yaml" in proc.stderr and "amenity_features" in proc.stderr
    assert store.count_runs() == 0


def test_run_is_stored_with_market_event(store):
    """A stored run records the market's name and digest and every payment as an event."""
    r = execute(build_spec("market", seed=1, sets=["customers_n=8", "businesses_n=20", "search=optimal"]), store)
    kinds = [e.kind for e in store.events(r.run_id)]
    assert kinds[0] == "market" and kinds.count("payment") == round(r.metrics["payment_rate"] * 8) > 0
    assert r.metrics["welfare"] == pytest.approx(r.metrics["optimal_welfare"])


@pytest.mark.slow
@needs_data
def test_llm_customers_and_businesses_complete_a_small_market(store):
    """The embedded model plays both sides of mexican_3_9: the run ends and every decision is valid."""
    spec = build_spec("market", policy="llm", seed=1, sets=["market=mexican_3_9", "search=optimal", "max_steps=2"])
    r = execute(spec, store)
    assert r.status == "finished" and r.fallbacks == 0
    steps = store.steps(r.run_id)
    assert any("pay" in s.action for s in steps) and any("respond" in s.action for s in steps)
    for s in steps:
        if "respond" in s.action:
            assert 0 <= s.action["respond"] <= 100
    assert r.metrics["payment_rate"] + r.metrics["left_rate"] + r.metrics["timed_out_rate"] == pytest.approx(1.0)


# ----- the indexes answer what a scan of every business answers ----------------------------------------------------
def _scan_market(seed: int):
    """A small synthetic market with ties (ratings and prices rounded to cents), plus an amenity nobody has."""
    import dataclasses

    market = mdata.generate(150, 400, seed)
    odd = dataclasses.replace(market.customers[0], amenities=("Rooftop Pool",))
    empty = dataclasses.replace(market.customers[1], items={})
    return dataclasses.replace(market, customers=(*market.customers, odd, empty))


@pytest.mark.parametrize("seed", [0, 1])
def test_indexed_search_and_reference_welfare_equal_a_scan_of_every_business(seed):
    """Lexical (bit-sliced scores over rating ranks), optimal (price-ordered walk, set intersections), the optimal
    and cheapest reference welfare and the random-match medians give exactly what a plain scan and sort of every
    business gives (the pre-index definitions, written out here), at every bandwidth up to the config's limit."""
    import random
    import statistics

    from scenarios.market import measures
    from scenarios.market.search import SearchIndex, tokens

    market = _scan_market(seed)
    bs, index = market.businesses, SearchIndex(market.businesses)
    words = [tokens(" ".join([b.name, b.description, *b.menu, *(a for a, v in b.amenities.items() if v)])) for b in bs]

    def lexical(c, bw):
        query = tokens(" ".join([c.request, *c.items, *c.amenities]))
        scored = [(len(query & words[k]), k) for k in range(len(bs))]
        return [k for s, k in sorted((x for x in scored if x[0]), key=lambda x: (-x[0], -bs[x[1]].rating, x[1]))][:bw]

    def matches(c):
        return [k for k, b in enumerate(bs) if b.sells_all(c.items)] if c.items else []

    def optimal(c, bw):
        key = lambda k: (not bs[k].has_amenities(c.amenities), sum(bs[k].menu[i] for i in c.items), k)  # noqa: E731
        return sorted(matches(c), key=key)[:bw]

    def cheapest(c, amenities):
        ks = [k for k in matches(c) if not amenities or bs[k].has_amenities(c.amenities)]
        return min(ks, key=lambda k: (measures.menu_total(c, bs[k]), k), default=None)

    def median(amenities, draws, s):
        options = [[measures.menu_utility(c, bs[k]) for k in matches(c)
                    if not amenities or bs[k].has_amenities(c.amenities)] for c in market.customers]
        rng = random.Random(s)
        return float(statistics.median([sum(rng.choice(us) for us in options if us) for _ in range(draws)]))

    for c in market.customers:
        for bw in (1, 3, 10, 65, 1000):
            assert index.search("lexical", c, bw, random.Random(0)) == lexical(c, bw), (c.id, bw)
            assert index.search("optimal", c, bw, random.Random(0)) == optimal(c, bw), (c.id, bw)
        assert measures.optimal_choice(c, bs, index) == cheapest(c, True), c.id
    assert measures.optimal_welfare(market, index) == sum(
        measures.menu_utility(c, bs[k]) for c in market.customers if (k := cheapest(c, True)) is not None)
    assert measures.cheapest_welfare(market, index) == sum(
        measures.menu_utility(c, bs[k]) for c in market.customers if (k := cheapest(c, False)) is not None)
    for amenities in (False, True):
        assert measures.random_welfare_median(market, index, amenities=amenities, draws=41, seed=seed) == \
            median(amenities, 41, seed)


def _magentic(**sets):
    """A synthetic market under magentic.yaml's switches, every LLM request answered by the scripted strategies."""
    from tests.conftest import scripted_model

    return scripted_model("market", config_file="scenarios/market/configs/magentic.yaml",
                          sets=["customers_n=4", "businesses_n=12", *[f"{k}={v}" for k, v in sets.items()]])


def test_magentic_protocol_customer_sees_the_request_only_and_searches_with_its_own_query():
    model = _magentic()
    assert model.phases() == ("search", "message", "respond", "pay")
    model.steps += 1
    s = model.shoppers[0]
    r = model.observe(s, "search")
    assert r.phase == "search" and s.customer.request.strip()[:30] in r.context
    assert "worth $" not in r.context and "twice the value" not in r.context  # no values, no utility rule
    target = model.sellers[5].business
    assert model.index.search_text(f"{target.name} {target.description}", 3)[0] == 5  # the query decides the results
    model.act("search", [Decision(s.unique_id, "search", f"{target.name} {target.description}", "llm")])
    assert s.results and s.results[0] == 5


def test_magentic_protocol_business_sees_its_menu_and_offers_carry_no_notes():
    for notes, shown in (("false", False), ("true", True)):
        m = _magentic(offer_notes=notes)
        m.steps += 1
        s = next(s for s in m.shoppers if len(s.customer.items) >= 2)
        first = next(iter(s.customer.items))
        m.offer(s, 0, {first: 1.0}, full=False, amenities=True)  # an offer missing the other items
        assert ("(missing:" in m.observe(s, "pay").context) is shown
    from scenarios.market.participants import Inquiry
    menu_priced = _magentic()  # magentic.yaml quotes menu prices (`pricing: menu`): no business is asked a price
    menu_priced.steps += 1
    menu_priced.sellers[0].inbox = [Inquiry(menu_priced.shoppers[0], "Hello, an offer please.", 0.0, 0)]
    assert menu_priced.observe(menu_priced.sellers[0], "respond") is None
    model = _magentic(pricing="decide")  # where a business decides its price, it reads Magentic's view (`menu_prompt`)
    model.steps += 1
    b, s0 = model.sellers[0], model.shoppers[0]
    b.inbox = [Inquiry(s0, "Hello, an offer please.", 0.0, 0)]
    s0.done = False
    r = model.observe(b, "respond")
    assert "Your menu:" in r.context and "(your menu price:" not in r.context and "Hello, an offer please." in r.context
    default = _magentic(menu_prompt="false", offer_notes="true", customer_view="values", customer_search="false")
    assert default.phases() == ("message", "respond", "pay")
