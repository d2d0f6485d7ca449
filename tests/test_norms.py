"""Norm formation in the commons on hand-made months, and the norm view (analysis/norms.py)."""

import pytest

from agents.scripted import ScriptedBackend
from analysis.norms import compliance_by_tick, norm_drift, norm_timeline, norm_view, sanctions_by_agent, similarity
from scenarios.commons.norms import graduated_fine
from scenarios.commons.strategies import STRATEGIES
from runner.config import build_spec
from runner.execution import execute

# month -> phase -> fisher -> decision (fishers are 1..5)
MONTHS = {
    1: {"propose": {1: 8, 2: 8, 3: 8, 4: 20, 5: 12},
        "vote": {1: "8 tons", 2: "8 tons", 3: "8 tons", 4: "20 tons", 5: "12 tons"},
        "harvest": {1: 8, 2: 8, 3: 8, 4: 20, 5: 9},
        "sanction": {1: "fisher 4", 2: "none", 3: "none", 4: "none", 5: "none"}},
    2: {"propose": {1: 6, 2: 6, 3: 15, 4: 15, 5: 10},
        "vote": {1: "6 tons", 2: "6 tons", 3: "15 tons", 4: "15 tons", 5: "10 tons"},
        "harvest": {1: 8, 2: 8, 3: 8, 4: 12, 5: 8},
        "sanction": {1: "fisher 4", 2: "fisher 4", 3: "none", 4: "none", 5: "none"}},
}


def scripted_months(request, rng):
    """The hand-made decisions of MONTHS; a fisher with nothing to fine says none."""
    value = MONTHS[request.tick][request.phase][request.agent_id]
    if request.phase == "sanction" and value not in request.space.options:
        return "none"
    return value


def run_months(store, vote_rule="majority", **fields):
    sets = ["norm_formation=true", "sanctions=true", "months=2", "strategy=fixed", "sanction_cost=1",
            "sanction_fine=2", "sanction_growth=1", "monitoring_cost=0.5", f"vote_rule={vote_rule}"]
    sets += [f"{k}={v}" for k, v in fields.items()]
    backends = {"scripted": ScriptedBackend({**STRATEGIES, "fixed": scripted_months})}
    return execute(build_spec("commons", sets=sets, seed=0), store, backends=backends)


def test_majority_adopts_and_a_split_vote_keeps_the_norm_in_force(store):
    """3 of 5 votes adopt 8 t in month 1; a 2-2-1 split adopts nothing under majority and 8 t stays in force."""
    r = run_months(store)
    events = store.events(r.run_id)
    adoptions = [e for e in events if e.kind == "norm.adoption"]
    assert [(e.tick, e.data["rule"]["max_catch"], e.data["votes"], e.data["cast"]) for e in adoptions] == [(1, 8.0, 3, 5)]
    results = [e.data for e in events if e.kind == "vote.result"]
    assert [x["adopted"] for x in results] == [True, False]
    month2 = [e for e in events if e.kind in ("norm.compliance", "norm.violation") and e.tick == 2]
    assert {e.data["limit"] for e in month2} == {8.0}
    assert r.metrics["norm_limit_final"] == 8.0 and r.metrics["norm_adoptions"] == 1.0


def test_plurality_breaks_ties_toward_the_lower_limit(store):
    """Under plurality the 2-2-1 split of month 2 adopts 6 t (tied with 15 t, lower wins)."""
    r = run_months(store, vote_rule="plurality")
    adopted = [(e.tick, e.data["rule"]["max_catch"]) for e in store.events(r.run_id) if e.kind == "norm.adoption"]
    assert adopted == [(1, 8.0), (2, 6.0)]


def test_compliance_graduated_sanctions_and_monitoring_cost(store):
    """Catches are judged against the norm in force; a repeat violator's fine grows; monitoring costs everyone."""
    r = run_months(store)
    events = store.events(r.run_id)
    judged = {(e.tick, e.actor): e.kind.split(".")[1] for e in events if e.kind in ("norm.compliance", "norm.violation")}
    assert [judged[(1, a)] for a in range(1, 6)] == ["compliance"] * 3 + ["violation"] * 2
    assert [judged[(2, a)] for a in range(1, 6)] == ["compliance"] * 3 + ["violation", "compliance"]
    fines = [(e.tick, e.actor, e.target, e.data["cost"], e.data["fine"]) for e in events if e.kind == "norm.sanction"]
    # fisher 4's first violation costs 2; its second costs 2 x (1 + 1) = 4, from each of two sanctioners
    assert sorted(fines) == [(1, 1, 4, 1.0, 2.0), (2, 1, 4, 1.0, 4.0), (2, 2, 4, 1.0, 4.0)]
    pay = {(s.tick, s.agent_id): s.payoff for s in store.steps(r.run_id)}
    assert pay[(1, 4)] == pytest.approx(20 - 2 - 0.5)
    assert pay[(1, 1)] == pytest.approx(8 - 1 - 0.5)
    assert pay[(2, 4)] == pytest.approx(12 - 8 - 0.5)
    assert r.metrics["monitoring_cost_total"] == pytest.approx(5)
    assert r.metrics["sanction_fines_total"] == pytest.approx(10)
    assert graduated_fine(2, 0.5, 3) == pytest.approx(4)


def test_social_learning_copies_the_peers_stated_belief(store):
    """An imitating fisher states its peer's proposal as its own next month."""
    population = "[{count: 3, strategy: sustainable}, {count: 3, strategy: greedy}]"
    spec = build_spec("commons", seed=2, sets=["norm_formation=true", "social_learning=true", "fishers=6", "months=6",
                                               "sanctions=true", "sanction_fine=10", f"population={population}"])
    r = execute(spec, store)
    events = store.events(r.run_id)
    stated = {(e.tick, e.actor): e.data["rule"]["max_catch"] for e in events if e.kind == "norm.statement"}
    stock = {t.tick: t.state["stock_start"] for t in store.ticks(r.run_id)}
    copies = [e for e in events if e.kind == "learn.imitate" and e.data["belief"] is not None and e.tick < r.ticks]
    assert copies
    for e in copies:
        assert stated[(e.tick + 1, e.actor)] == min(e.data["belief"], int(stock[e.tick + 1]))


# ----- the norm view on hand-made events -------------------------------------------------
def ev(tick, kind, actor=None, target=None, **data):
    return {"tick": tick, "kind": f"norm.{kind}", "actor": actor, "target": target, "data": data}


HAND = [
    ev(1, "statement", 1, norm="limit", rule={"max": 10}, text="catch at most 10"),
    ev(1, "statement", 2, norm="limit", rule={"max": 14}, text="catch at most 14"),
    ev(1, "adoption", None, norm="limit", rule={"max": 10}, text="adopted", votes=2),
    ev(1, "compliance", 1, norm="limit"), ev(1, "violation", 2, norm="limit"),
    ev(1, "sanction", 1, 2, norm="limit", cost=1.0, fine=3.0),
    {"tick": 1, "kind": "message", "actor": 1, "target": None, "data": {"text": "not a norm event"}},
    ev(2, "compliance", 1, norm="limit"), ev(2, "compliance", 2, norm="limit"),
    ev(3, "statement", 1, norm="limit", rule={"max": 6}, text="at most 6"),
    ev(3, "violation", 1, norm="limit"), ev(3, "compliance", 2, norm="limit"),
    ev(3, "sanction", 2, 1, norm="limit", cost=1.0, fine=6.0), ev(3, "sanction", 3, 1, norm="limit", cost=1.0, fine=6.0),
]


def test_timeline_carries_the_norm_in_force():
    """Statements and adoptions per tick; the adopted rule stays in force on later ticks."""
    rows = norm_timeline(HAND)
    assert [r["tick"] for r in rows] == [1, 3]
    assert [s["by"] for s in rows[0]["stated"]] == [1, 2] and rows[0]["adopted"][0]["votes"] == 2
    assert rows[1]["adopted"] == [] and rows[1]["in_force"] == {"limit": {"max": 10}}


def test_compliance_rate_per_tick_and_sanctions_per_agent():
    """Rate = compliances / judged per tick; sanctions given/received with costs and fines per agent."""
    assert [(r["tick"], r["rate"]) for r in compliance_by_tick(HAND)] == [(1, 0.5), (2, 1.0), (3, 0.5)]
    s = sanctions_by_agent(HAND)
    assert s[1] == {"given": 1, "received": 2, "cost_paid": 1.0, "fines_received": 12.0}
    assert s[2]["given"] == 1 and s[2]["received"] == 1 and s[3]["received"] == 0


def test_drift_of_numeric_and_text_norms():
    """Numeric rules: 1 - relative difference of tick means; texts: Jaccard of word sets."""
    d = norm_drift(HAND)
    assert [x["tick"] for x in d] == [1, 3] and d[0]["drift"] is None
    assert d[1]["to_previous"] == pytest.approx(1 - (12 - 6) / 12)
    texts = [ev(1, "statement", 1, norm="s", rule={}, text="give half to generous players"),
             ev(2, "statement", 1, norm="s", rule={}, text="give nothing to players")]
    assert norm_drift(texts)[1]["to_previous"] == pytest.approx(len({"give", "players"}) / len({"give", "half", "generous", "players", "nothing"}))
    assert similarity([], []) is None


def test_norm_view_of_a_stored_run(store):
    """The view reads a real run from the store: adoption in the timeline, rates per tick, fines per agent."""
    r = run_months(store)
    view = norm_view(store, r.run_id)
    assert view["timeline"][0]["in_force"] == {"catch_limit": {"max_catch": 8.0}}
    assert [c["rate"] for c in view["compliance"]] == [0.6, 0.8]
    assert view["sanctions"][4]["fines_received"] == pytest.approx(10)
