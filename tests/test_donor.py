"""The donor game: closed-form resources, selection, punishment, pairing, inheritance, horizon."""

import pytest

from agents.scripted import ScriptedBackend
from scenarios.donor.strategies import STRATEGIES
from runner.config import build_spec
from sim.core.errors import UsageError
from runner.execution import execute


def run(store, seed=0, backends=None, **fields):
    sets = [f"{k}={v}" for k, v in fields.items()]
    return execute(build_spec("donor", sets=sets, seed=seed, policy="scripted"), store, backends=backends)


def closed_form(endowment, fraction, multiplier, rounds):
    """Homogeneous fixed fraction: the two halves' resources after a game, from the rules alone."""
    first, second = endowment, endowment  # the half that donates in round 1, the other half
    for r in range(rounds):
        if r % 2 == 0:
            second += multiplier * fraction * first
            first -= fraction * first
        else:
            first += multiplier * fraction * second
            second -= fraction * second
    return first, second


@pytest.mark.parametrize("fraction,multiplier,rounds", [(0.5, 2.0, 12), (0.3, 3.0, 5), (0.0, 2.0, 4)])
def test_homogeneous_fixed_fraction_gives_the_closed_form(store, fraction, multiplier, rounds):
    """One generation (no selection) of equal donors ends each game at the closed-form resources."""
    r = run(store, strategy="fixed", fraction=fraction, multiplier=multiplier, rounds=rounds, agents=12, generations=1)
    first, second = closed_form(10.0, fraction, multiplier, rounds)
    assert r.ticks == 2 * rounds
    assert r.metrics["avg_final_resources"] == pytest.approx((first + second) / 2)
    assert r.metrics["avg_final_resources_gen_1"] == pytest.approx((first + second) / 2)
    # each player's payoffs over one game sum to its final resources minus the endowment
    for game in (1, 2):
        ticks = range((game - 1) * rounds + 1, game * rounds + 1)
        per_agent = {}
        for s in store.steps(r.run_id):
            if s.tick in ticks:
                per_agent[s.agent_id] = per_agent.get(s.agent_id, 0.0) + s.payoff
        finals = sorted(10.0 + v for v in per_agent.values())
        assert finals == pytest.approx(sorted([first] * 6 + [second] * 6))
    assert r.metrics["donation_rate"] == pytest.approx(fraction)


def test_pairing_alternates_roles_and_never_repeats_a_recipient(store):
    """Each round half the players give, each to a distinct recipient; no donor->recipient pair twice in a game."""
    r = run(store, strategy="fixed", agents=8, rounds=8, generations=1)
    donations = [e for e in store.events(r.run_id) if e.kind == "donation"]
    by_tick = {}
    for e in donations:
        by_tick.setdefault(e.tick, []).append(e)
    assert sorted(by_tick) == list(range(1, 17)) and all(len(v) == 4 for v in by_tick.values())
    for game in (range(1, 9), range(9, 17)):
        pairs = [(e.actor, e.target) for t in game for e in by_tick[t]]
        assert len(set(pairs)) == len(pairs)
        donors = [{e.actor for e in by_tick[t]} for t in game]
        assert all(a.isdisjoint(b) for a, b in zip(donors, donors[1:]))  # roles alternate
        assert all(donors[i] == donors[i + 2] for i in range(len(donors) - 2))
    # the second game swaps which half donates first
    assert {e.actor for e in by_tick[1]} == {e.actor for e in by_tick[10]}


def test_defectors_out_survive_unconditional_donors(store):
    """With selection, defectors take the survivors' places from generous donors."""
    population = "[{count: 6, strategy: fixed}, {count: 6, strategy: defector}]"
    r = run(store, seed=3, generations=3, rounds=6, population=population)
    gens = [e for e in store.events(r.run_id) if e.kind == "generation"]
    assert len(gens) == 2
    ticks = store.ticks(r.run_id)
    first, last = ticks[0].state["strategies"], ticks[-1].state["strategies"]
    assert first == {"defector": 6, "fixed": 6}
    assert last.get("defector", 0) > 6
    inherits = [e for e in store.events(r.run_id) if e.kind == "learn.inherit" and e.tick == 13]
    assert len(inherits) == 6 and sum(e.data["strategy"] == "defector" for e in inherits) > 3


def test_inheritance_mutates_the_copied_fraction_seeded(store):
    """Newcomers copy a survivor's fraction with seeded Gaussian mutation; same seed, same children."""
    a = run(store, seed=5, generations=2, rounds=2, agents=4, mutation=0.1)
    b = run(store, seed=5, generations=2, rounds=2, agents=4, mutation=0.1)
    kids = lambda res: [e.data for e in store.events(res.run_id) if e.kind == "learn.inherit"]  # noqa: E731
    assert kids(a) == kids(b) and len(kids(a)) == 2
    assert all(k["fraction"] != 0.5 and 0 <= k["fraction"] <= 1 for k in kids(a))
    c = run(store, seed=5, generations=2, rounds=2, agents=4, mutation=0.0)
    assert all(k["fraction"] == 0.5 for k in kids(c))


def test_punishment_removes_exactly_multiplier_times_the_cost(store):
    """A donor paying x to punish loses x; the recipient loses punish_multiplier x; a norm.sanction records both."""
    def punish(request, rng):
        return "punish" if request.phase == "action" else 25.0

    backends = {"scripted": ScriptedBackend({**STRATEGIES, "fixed": punish})}
    r = run(store, backends=backends, agents=2, rounds=1, generations=1, punishment="true", punish_multiplier=3)
    tick1 = {s.agent_id: s.payoff for s in store.steps(r.run_id) if s.tick == 1}
    sanctions = [e for e in store.events(r.run_id) if e.kind == "norm.sanction" and e.tick == 1]
    assert len(sanctions) == 1
    s = sanctions[0]
    assert s.data["cost"] == pytest.approx(2.5) and s.data["fine"] == pytest.approx(7.5)
    assert tick1[s.actor] == pytest.approx(-2.5) and tick1[s.target] == pytest.approx(-7.5)
    assert r.metrics["punishment_share"] == 1.0 and r.metrics["norm_sanctions"] == 2.0


def test_punishers_punish_only_stingy_recipients(store):
    """Scripted punishers punish recipients whose last gift fell below their threshold, and give otherwise."""
    population = "[{count: 4, strategy: punisher}, {count: 4, strategy: defector}]"
    r = run(store, agents=8, rounds=6, generations=1, punishment="true", population=population)
    defectors = {s.agent_id for s in store.steps(r.run_id) if s.tick == 1} - {
        e.actor for e in store.events(r.run_id) if e.kind == "donation" and e.data["share"] > 0}
    sanctions = [e for e in store.events(r.run_id) if e.kind == "norm.sanction"]
    assert sanctions and all(e.target in defectors for e in sanctions)
    assert all(e.data["fine"] == pytest.approx(2 * e.data["cost"]) for e in sanctions)


def test_horizon_counts_rounds_and_is_bounded():
    """total_rounds defaults to generations x 2 x rounds; more is refused; odd players are refused."""
    assert build_spec("donor", sets=["generations=3", "rounds=4"]).config["total_rounds"] == 24
    with pytest.raises(UsageError, match="total_rounds"):
        build_spec("donor", sets=["generations=1", "rounds=4", "total_rounds=9"])
    with pytest.raises(UsageError, match="even"):
        build_spec("donor", sets=["agents=5"])
    with pytest.raises(UsageError, match="rounds"):
        build_spec("donor", sets=["agents=4", "rounds=6"])
