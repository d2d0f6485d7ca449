"""The columnar tick: batched requests and decisions, vectorised draws, step columns and running metrics.

Each fast path is held to the one-by-one path it replaces: same seeds, same draws, same checked
values, same stored run to the byte.
"""

import json
import math
import random
from dataclasses import replace

import numpy as np
import pytest
from sqlalchemy import text

from agents.scripted import ScriptedBackend
from sim.contracts.backend import Backend
from sim.contracts.memory import Memory
from scenarios.commons.model import CommonsModel
from sim.reward import metrics
from sim.tick.broker import DecisionBroker
from runner.config import build_spec
from sim.core.contracts import Decision, DecisionColumns, RequestBatch, values_by_agent
from sim.core.records import AgentStepRecord, RewardVectors, StepColumns
from sim.core.rng import CounterRandom, SeedStream, randbelow_many
from runner.execution import execute
from sim.core.spaces import Number
from sim.store.encoding import dumps
from sim.store.vectors import pack, read_vectors


def test_seeds_for_many_are_the_one_by_one_seeds_under_both_versions():
    ids = [0, 1, 7, 999, 2**40, 5, 5]
    for version in (1, 2):
        s = SeedStream(2024, version)
        want = [s.seed_for(9, a, "harvest") for a in ids]
        assert s.seeds_for_many(9, ids, "harvest").tolist() == want
        assert s.seeds_for_many(9, np.asarray(ids, dtype=np.uint64), "harvest").tolist() == want
    odd = SeedStream(1, 2)
    assert odd.seeds_for_many(3, ["x", -4], "talk").tolist() == [odd.seed_for(3, "x", "talk"), odd.seed_for(3, -4, "talk")]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 21, 1000, 2**33 + 1, 2**64 - 3, 2**64, 2**70 + 5])
def test_randbelow_many_draws_what_counter_random_draws(n):
    seeds = SeedStream(5, 2).seeds_for_many(2, list(range(600)), "harvest")
    want = [CounterRandom(int(s)).randrange(n) for s in seeds.tolist()]
    assert randbelow_many(seeds, n) == want
    assert want == [CounterRandom(int(s)).randint(0, n - 1) for s in seeds.tolist()]
    if n > 2:
        assert len(set(want)) > 1  # they differ by seed
    with pytest.raises(ValueError):
        randbelow_many(seeds, 0)


def _model(sets, seed=3):
    spec = build_spec("commons", sets=sets, seed=seed)
    return CommonsModel(CommonsModel.Config.model_validate(spec.config), seed=seed,
                        broker=DecisionBroker({"scripted": ScriptedBackend(CommonsModel.strategies)}))


def test_a_harvest_batch_holds_the_requests_observe_gives():
    model = _model(["fishers=30", "strategy=random", "capacity=600", "disposition=altruistic", "population=null"])
    model.step()
    model.update()
    batch = model.observe_batch("harvest")
    assert isinstance(batch, RequestBatch) and len(batch) == 30
    assert list(batch) == [model.observe(a, "harvest") for a in model.agents]
    assert batch[-1] == model.observe(list(model.agents)[-1], "harvest") and batch[2:4] == list(batch)[2:4]
    assert model.observe_batch("talk") is None  # only a harvest is batched


def test_an_llm_fisher_is_never_batched():
    sets = ["fishers=3", 'population=[{"count": 2, "strategy": "greedy"}, {"count": 1, "policy": "llm"}]']
    spec = build_spec("commons", sets=sets, seed=1)
    model = CommonsModel(CommonsModel.Config.model_validate(spec.config), seed=1, broker=DecisionBroker({}))
    assert model.observe_batch("harvest") is None
    with pytest.raises(ValueError, match="one non-LLM policy"):
        model.batch_request(tuple(model.agents), "harvest", Number(0, 5, 1), 0.0, {}, "")


def _stored(store, run_id):
    with store.engine.connect() as c:
        return [c.execute(text(q), {"r": run_id}).all() for q in (
            "select tick, metrics, state from ticks where run_id=:r order by tick",
            "select tick, agent_id, backend, action, payoff, reward, fallback, reason, memory from agent_steps where run_id=:r order by tick, agent_id",
            "select tick, kind, actor, target, data from events where run_id=:r order by id",
            "select status, ticks, final_metrics from runs where id=:r")]


STRATEGY_FILE = '''
import math
def overfish(request, rng):
    obs = request.observation
    if request.phase == "harvest":
        return float(min(math.floor(obs["stock"]), rng.randint(0, 40) + request.agent_id % 3))
    return request.default
'''


@pytest.mark.parametrize("sets", [
    # random catches within the stock (the order they are applied in leaves no trace)
    ["fishers=60", "months=8", "strategy=random", "capacity=1200", "collapse_below=0"],
    # demand beyond the stock: rationed unit by unit
    ["fishers=12", "months=6", "capacity=100", "collapse_below=0", "catch=20",
     'population=[{"count": 6, "strategy": "fixed"}, {"count": 6, "strategy": "random"}]'],
    # several strategies, a user's file strategy, a norm, sanctions, monitoring and social learning
    ["fishers=14", "months=8", "capacity=400", "norm_formation=true", "vote_rule=plurality", "sanctions=true", "social_learning=true",
     "monitoring_cost=0.2", "sanction_growth=0.5",
     'population=[{"count": 4, "strategy": "greedy"}, {"count": 5, "strategy": "random"}, '
     '{"count": 3, "strategy": "STRATEGY"}, {"count": 2, "strategy": "conditional"}]'],
])
def test_a_batched_harvest_stores_what_asking_one_by_one_stores(sets, store, tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text(STRATEGY_FILE)
    order_shows = any(s.startswith(("population=", "norm_formation=")) for s in sets)
    sets = [s.replace("STRATEGY", f"{tmp_path / 'mine.py'}:overfish") for s in sets]
    spec = build_spec("commons", sets=sets, seed=11)
    batched = execute(spec, store)
    monkeypatch.setattr(CommonsModel, "observe_batch", lambda self, phase: None)
    one_by_one = execute(spec, store)
    assert batched.ticks == one_by_one.ticks > 1
    stored = _stored(store, batched.run_id)
    assert stored == _stored(store, one_by_one.run_id)
    assert len({json.loads(a)["harvest"] for _, _, _, a, *_ in stored[1]}) > 2  # the catches differ: not a constant run
    harvests = [json.loads(d) for _, kind, _, _, d in stored[2] if kind == "harvest"]
    judged = [kind for _, kind, *_ in stored[2] if kind in ("norm.violation", "norm.compliance")]
    if order_shows:  # rationed units or judged catches: the order the decisions are applied in is stored
        assert any(h["rationed"] for h in harvests) or judged


class _Answers(Backend):
    """A backend answering a batch with given values, in columns or one by one."""

    name = "scripted"

    def __init__(self, values, columns=True):
        self.values = values
        if not columns:
            self.decide_columns = None

    def decide_batch(self, requests):
        return [Decision(r.agent_id, r.phase, v, self.name) for r, v in zip(requests, self.values)]

    def decide_columns(self, batch):
        return DecisionColumns(batch.phase, self.name, batch.agent_ids, list(self.values))


def _batch(n):
    return RequestBatch(tick=1, phase="harvest", space=Number(0, 10, 1), default=0.0, observation={"stock": 10.0},
                        agent_ids=list(range(100, 100 + n)), strategies=["x"] * n, personas=[""] * n,
                        seeds=list(range(n)))


@pytest.mark.parametrize("values", [
    [1.0, 2.0, 2.0, 10.0],  # all in the space
    [1.0, 11.0, 2.0, -1.0],  # out of range: fallbacks
    [1, 2, 3, 4],  # ints for a Number: normalised, not fallbacks
    [1.0, float("nan"), 2.5, 3.0],  # NaN and off the grid
    [1.0, [2.0], "3", None],  # unhashable and wrong types
])
@pytest.mark.parametrize("columns", [True, False])
def test_the_broker_checks_a_batch_as_it_checks_requests_one_by_one(values, columns):
    batch = _batch(len(values))
    broker = DecisionBroker({"scripted": _Answers(values, columns)})
    if not columns:
        del broker.backends["scripted"].decide_columns  # a backend without decide_columns gets the requests
    got = broker.decide_columns(batch)
    want = broker.decide(list(batch))
    assert list(got) == [want[a] for a in batch.agent_ids]
    assert values_by_agent(got) == {a: d.value for a, d in want.items()}
    assert [d.agent_id for d in got.fallbacks()] == [a for a, d in want.items() if d.fallback]
    order = [3, 0, 2, 1]
    assert list(got.take(order)) == [got[i] for i in order]


def test_decision_columns_keep_every_decision_that_is_more_than_a_value():
    plain = Decision(1, "harvest", 2.0, "scripted")
    fell = Decision(2, "harvest", 0.0, "scripted", fallback=True, reason="invalid: x", attempts=3, raw="??")
    cached = Decision(3, "harvest", 1.0, "scripted", cached=True)
    cols = DecisionColumns.of("harvest", "scripted", [plain, fell, cached])
    assert list(cols) == [plain, fell, cached] and set(cols.special) == {1, 2}
    assert cols.fallbacks() == [fell] and values_by_agent(cols) == {1: 2.0, 2: 0.0, 3: 1.0}
    assert cols[-2] == fell and cols[0:2] == [plain, fell]


def test_step_columns_give_the_records_and_the_rows_the_store_wrote_before():
    """StepColumns give the very AgentStepRecords and store rows the one-by-one path gives; their reward vectors, packed,
    read back as the JSON each row once held read back."""
    ids = [1, 2, 3, 4, 5]
    vectors = RewardVectors(ids, {"payoff": np.array([1.0, -0.0, 0.0, 0.0, 2.0]),
                                  "envy": np.array([0.0, 0.0, 0.5, 0.5, float("nan")])})
    cols = StepColumns(ids, ["scripted"] * 4 + ["llm"], [1.0, -0.0, 0.0, float("nan"), 2.0], [1.0, 0.0, 0.0, 0.0, 2.0],
                       [("harvest", {1: 0.0, 2: -0.0, 3: 0.0, 5: float("inf")})], {2: "harvest: invalid"},
                       {5: {"items": [1, 2]}}, vectors)
    records = list(cols)
    assert records[1] == AgentStepRecord(2, {"harvest": -0.0}, -0.0, 0.0, True, "scripted", "harvest: invalid", None,
                                         {"payoff": 0.0})
    assert records[3].action == {} and records[4].memory == {"items": [1, 2]}
    old = [("r", 7, st.agent_id, st.backend, dumps(st.action), st.payoff, st.reward, st.fallback, st.reason,
            None if st.memory is None else dumps(st.memory)) for st in records]
    rows = cols.rows(("r", 7), dumps)
    assert [r[:4] + r[5:] for r in rows] == [r[:4] + r[5:] for r in old]
    assert [r[4] for r in rows] == [r[4] for r in old] == ['{"harvest":0.0}', '{"harvest":-0.0}', '{"harvest":0.0}', "{}",
                                                          '{"harvest":null}']
    # the JSON a row once held (non-zero components, the payoff always, NaN as null), as the store reads it back
    assert read_vectors(pack(vectors)) == {aid: json.loads(dumps(st.components)) for aid, st in zip(ids, records)} == {
        1: {"payoff": 1.0}, 2: {"payoff": 0.0}, 3: {"payoff": 0.0, "envy": 0.5}, 4: {"payoff": 0.0, "envy": 0.5},
        5: {"payoff": 2.0, "envy": None}}
    two = StepColumns([1], ["scripted"], [1.0], [1.0], [("talk", {1: "hi"}), ("harvest", {1: 2.0})], {}, {})
    assert two.rows((), dumps) == [(1, "scripted", '{"talk":"hi","harvest":2.0}', 1.0, 1.0, False, None, None)]


def test_gini_in_numpy_is_the_same_float_as_in_python():
    rng = random.Random(3)
    for n in (256, 300, 5000):
        for make in (lambda: rng.uniform(-3, 50), lambda: rng.randint(0, 20), lambda: rng.expovariate(1) * 1e9,
                     lambda: 0.0):
            xs = [make() for _ in range(n)]
            assert metrics.gini(xs) == metrics._gini_python(xs)
    assert metrics.gini(iter([1.0, 3.0])) == metrics._gini_python([1.0, 3.0])


def test_the_running_perolat_metrics_are_the_same_floats_as_recomputing_them():
    rng = random.Random(8)
    for trial in range(120):
        n = rng.choice([1, 4, 300, 900])
        ids = list(range(n))
        rng.shuffle(ids)
        tracker, ticks, sanctioned = metrics.PerolatTracker(n), [], []
        for t in range(rng.randint(1, 12)):
            if trial % 3 == 0 and rng.random() < 0.2:  # agents leave and join: the tracker leaves its arrays
                ids = [a for a in ids if rng.random() < 0.9] + [10_000 + 100 * t + k for k in range(rng.randint(0, 3))]
            rewards = {a: rng.choice([0.0, -1.0, rng.uniform(-2, 9), float(rng.randint(0, 5))]) for a in ids}
            ticks.append(rewards)
            sanctioned.append(rng.randint(0, 2))
            tracker.update(rewards, sanctioned[-1])
            assert tracker.values() == metrics.perolat(ticks, sanctioned, n)
        assert tracker.returns == {a: sum(r[a] for r in ticks if a in r) for a in tracker.returns}
        assert set(tracker.returns) == {a for r in ticks for a in r}


def test_a_batch_needs_one_seed_strategy_and_persona_per_agent():
    with pytest.raises(ValueError, match="one id, strategy, persona and seed"):
        RequestBatch(tick=1, phase="harvest", space=Number(0, 1, 1), default=0.0, observation={}, agent_ids=[1, 2],
                     strategies=["x"], personas=["", ""], seeds=[1, 2])
    with pytest.raises(Exception):
        RequestBatch(tick=1, phase="harvest", space=Number(0, 1, 1), default=5.0, observation={}, agent_ids=[1],
                     strategies=["x"], personas=[""], seeds=[1])  # the default must lie in the space


def test_the_benchmark_model_and_the_tick_agree_on_a_scripted_fishery_of_ten_thousand():
    """10,000 fishers, batched: every fisher decided, each catch in its space, and the run is reproducible."""
    a = _model(["fishers=10000", "months=3", "strategy=random", "capacity=200000", "collapse_below=0"], seed=4)
    b = _model(["fishers=10000", "months=3", "strategy=random", "capacity=200000", "collapse_below=0"], seed=4)
    for _ in range(3):
        a.step()
        b.step()
    ra, rb = a.last_record, b.last_record
    assert len(ra.steps) == 10_000 and ra.metrics == rb.metrics
    catches = [st.action["harvest"] for st in ra.steps]
    assert catches == [st.action["harvest"] for st in rb.steps]
    assert all(0 <= c <= ra.metrics["stock_start"] / 10_000 and c == math.floor(c) for c in catches)
    assert len(set(catches)) > 10


SUBCLASS = '''
from scenarios.commons.model import CommonsModel


class Told(CommonsModel):
    """A fishery whose fishers also see their own gain so far (an overridden observe)."""

    def observe(self, agent, phase):
        request = super().observe(agent, phase)
        if request is not None:
            request.observation["own_gain"] = agent.gain
        return request


def modest(request, rng):
    """Catch 1 once 3 tons ahead, else 5 (reads what only the subclass's observe adds)."""
    if request.phase != "harvest":
        return request.default
    return 1.0 if request.observation["own_gain"] >= 3 else 5.0
'''


def test_a_fishery_subclass_with_its_own_observe_is_asked_one_by_one(store, tmp_path):
    (tmp_path / "told.py").write_text(SUBCLASS)
    group = json.dumps([{"count": 6, "strategy": f"{tmp_path / 'told.py'}:modest"}])
    spec = build_spec(f"{tmp_path / 'told.py'}:Told", sets=["fishers=6", "months=4", f"population={group}"], seed=2)
    r = execute(spec, store)
    assert r.status == "finished" and r.fallbacks == 0
    catches = [json.loads(a)["harvest"] for _, _, _, a, *_ in _stored(store, r.run_id)[1]]
    assert catches == [5.0] * 6 + [1.0] * 18  # the fishers read own_gain: 5 tons in month 1, then 1


def test_a_wrapped_strategy_is_not_taken_for_the_columnar_one_it_wraps():
    import functools

    greedy, rand = CommonsModel.strategies["greedy"], CommonsModel.strategies["random"]

    @functools.wraps(greedy)
    def shy(request, rng):  # odd fishers catch nothing
        return 0.0 if request.agent_id % 2 else greedy(request, rng)

    @functools.wraps(rand)
    def capped(request, rng):
        return min(3.0, rand(request, rng))

    model = _model(["fishers=20", "capacity=2000"])
    model.update()
    batch = model.observe_batch("harvest")
    batch.strategies = ["shy"] * 10 + ["capped"] * 10
    backend = ScriptedBackend({"shy": shy, "capped": capped})
    got = backend.decide_columns(batch)
    assert list(got) == backend.decide_batch(list(batch))
    assert 0.0 in got.values[:10] and max(got.values[10:]) <= 3.0


def test_a_backend_whose_decide_batch_was_replaced_is_asked_through_it():
    model = _model(["fishers=8", "capacity=800", "strategy=greedy"])
    model.update()
    batch = model.observe_batch("harvest")
    calls = []

    class Capped(ScriptedBackend):
        def decide_batch(self, requests):
            calls.append(len(requests))
            return [replace(d, value=min(d.value, 1.0)) for d in super().decide_batch(requests)]

    got = DecisionBroker({"scripted": Capped(CommonsModel.strategies)}).decide_columns(batch)
    assert calls == [8] and set(got.values) == {1.0}
    patched = ScriptedBackend(CommonsModel.strategies)
    plain = patched.decide_batch
    patched.decide_batch = lambda requests: [replace(d, value=2.0) for d in plain(requests)]
    assert set(DecisionBroker({"scripted": patched}).decide_columns(batch).values) == {2.0}
    patched.decide_columns = None  # not callable: asked through decide_batch, no crash
    assert set(DecisionBroker({"scripted": patched}).decide_columns(batch).values) == {2.0}


def test_strategies_asked_one_by_one_are_asked_in_the_batchs_order():
    seen = []

    def a(request, rng):
        seen.append(("a", request.agent_id))
        return float(len(seen) % 5)

    def b(request, rng):
        seen.append(("b", request.agent_id))
        return float(len(seen) % 3)

    model = _model(["fishers=8", "capacity=800"])
    model.update()
    batch = model.observe_batch("harvest")
    batch.strategies = ["a", "b"] * 4
    backend = ScriptedBackend({"a": a, "b": b})
    got = backend.decide_columns(batch).values
    first, seen[:] = list(seen), []
    assert got == [d.value for d in backend.decide_batch(list(batch))] and seen == first
    assert [s for s, _ in first] == ["a", "b"] * 4


def test_gini_takes_any_iterable_and_refuses_what_is_not_a_number():
    values = {i: float(i % 7) for i in range(300)}
    assert metrics.gini(values.values()) == metrics.gini(list(values.values())) == metrics._gini_python(values.values())
    assert metrics.gini(set(range(300))) == metrics._gini_python(range(300))
    for n in (10, 300):
        with pytest.raises(TypeError):
            metrics.gini([1.0] * (n - 1) + [None])


def test_step_rows_encode_values_that_are_equal_but_written_differently_apart():
    chosen = {1: (0.0,), 2: (-0.0,), 3: np.float64(-0.0), 4: np.float64(0.0), 5: 1, 6: True, 7: 1.0}
    ids = sorted(chosen)
    cols = StepColumns(ids, ["scripted"] * 7, [0.0] * 7, [0.0] * 7, [("x", chosen)], {}, {})
    assert [r[2] for r in cols.rows((), dumps)] == [dumps({"x": chosen[a]}) for a in ids]


def test_a_changed_memory_is_recorded_once_however_it_changed():
    """A tick records the memories that changed since they were last recorded, and only those: a change by `add`, by
    a subclass that bumps `version` itself, a replaced memory; a tick where none changed records none (the records
    skip looking then)."""

    class Noted(Memory):
        def note(self) -> None:
            self.summary += "noted"
            self.version += 1

    spec = build_spec("commons", sets=["fishers=6", "months=8", "strategy=random"], seed=2)
    model = CommonsModel(CommonsModel.Config.model_validate(spec.config), seed=2,
                         broker=DecisionBroker({"scripted": ScriptedBackend(CommonsModel.strategies)}))
    fishers = sorted(model.agents, key=lambda a: a.unique_id)

    def recorded() -> dict:
        model.step()
        return model.last_record.steps.memories

    assert recorded() == {} and recorded() == {}
    fishers[1].memory.add(model.tick, "observation", "the lake looks low")
    assert list(recorded()) == [fishers[1].unique_id]
    assert recorded() == {}
    fresh = Noted()
    fresh.add(model.tick, "note", "a memory brought along")
    fishers[2].memory = fresh
    assert list(recorded()) == [fishers[2].unique_id]  # a memory replaced by one of another version
    fishers[2].memory.note()
    fishers[4].memory.relate(fishers[0].unique_id, 0.5)
    assert sorted(recorded()) == [fishers[2].unique_id, fishers[4].unique_id]
    assert recorded() == {}
