"""Per-decision randomness (sim.core.rng), its versions, and the engine's fast agent loops (Roster, paused GC)."""

import gc
import random
import statistics

import pytest

from agents.scripted import ScriptedBackend
from scenarios.commons.model import CommonsConfig, CommonsModel
from sim.tick.broker import DecisionBroker
from runner.config import build_spec
from sim.core.profiles import CONTRACT, profile
from sim.core.rng import CounterRandom, LazyRandom, SeedStream, derive_seed
from sim.core.spec import RunSpec
from runner.execution import execute


def test_version_1_seeds_are_the_old_derive_seed():
    s = SeedStream(42, 1)
    for tick, agent, phase in [(1, 0, "harvest"), (7, 123, "talk"), (0, 99999, "vote")]:
        assert s.seed_for(tick, agent, phase) == derive_seed(42, tick, agent, phase)


def test_version_2_seeds_are_pure_distinct_and_63_bit():
    a, b = SeedStream(42, 2), SeedStream(42, 2)
    seeds = {a.seed_for(t, i, p) for t in range(1, 6) for i in range(2000) for p in ("talk", "harvest")}
    assert len(seeds) == 5 * 2000 * 2  # no collisions across ticks, agents and phases
    assert all(0 <= x < 2**63 for x in seeds)
    # a pure function of (seed, tick, agent, phase): order of asking does not matter
    assert [b.seed_for(3, i, "harvest") for i in reversed(range(50))] == [a.seed_for(3, i, "harvest") for i in reversed(range(50))]
    assert SeedStream(43, 2).seed_for(3, 5, "harvest") != a.seed_for(3, 5, "harvest")
    assert a.seed_for(3, 5, "harvest") != derive_seed(42, 3, 5, "harvest")
    with pytest.raises(ValueError, match="unknown rng version"):
        SeedStream(1, 3)


def test_counter_random_has_randoms_interface_and_is_reproducible():
    r1, r2 = CounterRandom(2024), CounterRandom(2024)
    draws = lambda r: (r.randint(0, 10), r.random(), r.choice("abcdef"), r.uniform(1, 2), r.gauss(0, 1),  # noqa: E731
                       r.sample(range(100), 3), r.getrandbits(0), r.getrandbits(130), r.randrange(0, 100, 5))
    assert draws(r1) == draws(r2)
    assert draws(CounterRandom(2025)) != draws(CounterRandom(2024))
    xs = [1, 2, 3, 4, 5, 6]
    r1.shuffle(xs)
    assert sorted(xs) == [1, 2, 3, 4, 5, 6]
    state = r1.getstate()
    ahead = [r1.random() for _ in range(3)]
    r1.setstate(state)
    assert [r1.random() for _ in range(3)] == ahead
    with pytest.raises(ValueError):
        r1.setstate(random.Random(1).getstate())
    # uniform enough for a simulation: mean and spread of 20,000 draws
    u = [CounterRandom(7).random() for _ in range(1)] + [r2.random() for _ in range(20_000)]
    assert abs(statistics.fmean(u) - 0.5) < 0.01 and abs(statistics.pstdev(u) - (1 / 12) ** 0.5) < 0.01
    counts = [0] * 10
    for _ in range(20_000):
        counts[r2.randint(0, 9)] += 1
    assert min(counts) > 1700 and max(counts) < 2300


def test_lazy_random_draws_like_mersenne_twister():
    assert [LazyRandom(5).randint(0, 99) for _ in range(1)] == [random.Random(5).randint(0, 99)]


def test_specs_name_their_contract_and_an_unnamed_one_is_version_1():
    spec = build_spec("commons", seed=3)
    assert spec.contract == CONTRACT == 10 and spec.profile.rng == 2
    stored_before_versions = {k: v for k, v in spec.model_dump(mode="json").items() if k not in ("contract", "rollout")}
    old = RunSpec.model_validate(stored_before_versions)
    assert old.contract == 1
    # a version-1 spec hashes as it did before the field existed; a version-2 one differently
    import hashlib
    import json
    before = hashlib.sha256(json.dumps(stored_before_versions, sort_keys=True).encode()).hexdigest()[:16]
    assert old.digest() == before != spec.digest()


def test_a_version_1_run_replays_with_version_1_and_differs_from_version_2(store):
    from runner.replay import replay_run

    sets = ["fishers=6", "months=4", "strategy=random", "capacity=200", "collapse_below=0"]
    v2 = build_spec("commons", sets=sets, seed=11)
    v1 = v2.model_copy(update={"contract": 1})
    r1, r2 = execute(v1, store), execute(v2, store)
    acts = lambda r: [s.action for s in store.steps(r.run_id)]  # noqa: E731
    assert acts(r1) != acts(r2)  # the version decides the random stream
    assert acts(r1) == acts(execute(v1, store))
    report = replay_run(store, r1.run_id)
    assert report["matched"], report


def _model(n: int) -> CommonsModel:
    cfg = CommonsConfig(fishers=n, months=5, strategy="random", capacity=100.0 * n, collapse_below=0)
    return CommonsModel(cfg, seed=1, broker=DecisionBroker({"scripted": ScriptedBackend(CommonsModel.strategies)}))


def test_roster_follows_agents_joining_leaving_and_in_place_reordering():
    from scenarios.commons.model import Fisher

    m = _model(5)
    assert [a.unique_id for a in m.agents] == sorted(a.unique_id for a in m.agents)
    first = next(iter(m.agents))
    first.remove()
    assert first not in list(m.agents) and len(list(m.agents)) == len(m.agents) == 4
    new = Fisher(m, policy="scripted", strategy="random", persona="")
    assert list(m.agents)[-1] is new and len(m.agents) == 5
    ids = [a.unique_id for a in m.agents]
    m.agents.shuffle(inplace=True)
    assert sorted(a.unique_id for a in m.agents) == sorted(ids)
    m.agents.sort("unique_id", ascending=False, inplace=True)
    assert [a.unique_id for a in m.agents] == sorted(ids, reverse=True)
    m.agents.select(lambda a: a.unique_id != new.unique_id, inplace=True)
    assert new not in list(m.agents) and len(list(m.agents)) == 4
    for a in m.agents:  # iterating a snapshot: removing while looping is safe
        a.remove()
    assert list(m.agents) == []


def test_a_tick_pauses_the_collector_and_restores_its_state():
    m = _model(20)
    assert gc.isenabled()
    m.step()
    assert gc.isenabled()
    gc.disable()
    try:
        m.step()
        assert not gc.isenabled()  # off stays off
    finally:
        gc.enable()


def test_a_sweep_keeps_the_contract_it_started_under(tmp_path, store):
    """A sweep recorded before contracts existed continues under contract 1: its finished runs keep
    their ids and are not run again; a new sweep records the current contract."""
    from sqlmodel import Session

    from sim.store.tables import SweepRow
    from runner.sweeps.backlog import prepare
    from runner.sweeps.executor import run_sweep
    from runner.sweeps.spec import load_sweep

    path = tmp_path / "s.yaml"
    path.write_text("scenario: commons\nbase: {months: 2, fishers: 3, strategy: random}\ngrid:\n  regrowth: [2.0]\nseeds: 2\n")
    definition = load_sweep(path)
    plan = prepare(store, definition)
    assert {spec["contract"] for _, _, spec in plan.todo} == {CONTRACT}
    with Session(store.engine) as s:  # make it a sweep stored before contracts: no contract recorded
        row = s.get(SweepRow, plan.sweep_id)
        row.definition = {k: v for k, v in row.definition.items() if k != "contract"}
        s.add(row)
        s.commit()
    old = prepare(store, definition)
    assert {spec["contract"] for _, _, spec in old.todo} == {1}
    assert {rid for rid, _, _ in old.todo}.isdisjoint({rid for rid, _, _ in plan.todo})  # the ids follow the contract
    run_sweep(store, old, workers=1)
    again = prepare(store, definition)
    assert again.todo == [] and again.done_before == again.total == 2


def test_a_scenario_picks_its_edition_once_from_its_table():
    """Editions apply from their first contract until the next one's; the fishery built under contracts 2, 3 and the
    current one holds the edition of each (its old pieces frozen in scenarios.commons.legacy)."""
    from scenarios.commons import editions
    from sim.tick.editions import Editions

    table = Editions({1: "a", 3: "b", 6: "c"})
    assert [table.at(c) for c in range(1, 9)] == ["a", "a", "b", "b", "b", "c", "c", "c"] and table.firsts() == (1, 3, 6)
    with pytest.raises(ValueError, match="must start at decision contract 1"):
        Editions({2: "a"})
    cfg = CommonsConfig(fishers=3, months=2)
    picked = {c: CommonsModel(cfg, seed=1, broker=DecisionBroker({}), contract=c).edition for c in (2, 3, CONTRACT)}
    assert picked == {2: editions.CONTRACT_1, 3: editions.CONTRACT_3, CONTRACT: editions.CURRENT}


def test_contract_maps_to_one_rng_version_and_counter_random_state_is_whole():
    assert [profile(c).rng for c in (1, 2, 3, 4)] == [1, 2, 2, 2]
    r = CounterRandom(9)
    r.gauss(0, 1)  # leaves its second value in gauss_next
    state = r.getstate()
    first = r.gauss(0, 1)
    r.setstate(state)
    assert r.gauss(0, 1) == first
    assert CounterRandom("label").random() == CounterRandom("label").random()


def test_a_copy_of_the_roster_does_not_keep_removed_agents():
    m = _model(3)
    copy = m.agents.select()
    list(copy)
    gone = next(iter(m.agents))
    gone.remove()
    del gone
    gc.collect()
    assert len(list(copy)) == 2
