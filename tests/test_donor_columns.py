"""The donor game's action and donate phases in columns: one RequestBatch of donors with their own observations.

Held to the one-by-one path it replaces: the same requests, the same answers, the same stored run to the byte.
"""

import json

import numpy as np
import pytest
from sqlalchemy import text

from agents.scripted import ScriptedBackend
from runner.config import build_spec
from runner.execution import execute
from scenarios.donor.model import DonorModel
from scenarios.donor.strategies import STRATEGIES
from sim.contracts.strategy import columnar_form
from sim.core.contracts import DecisionRequest, RequestBatch
from sim.core.rng import CounterRandom
from sim.core.spaces import Number
from sim.tick.broker import DecisionBroker

MIXED = ('population=[{"count": 4, "strategy": "punisher"}, {"count": 4, "strategy": "image"}, '
         '{"count": 4, "strategy": "random"}, {"count": 2, "strategy": "defector"}, {"count": 2, "strategy": "fixed"}]')


def _model(sets, seed=5):
    spec = build_spec("donor", sets=sets, seed=seed)
    return DonorModel(DonorModel.Config.model_validate(spec.config), seed=seed,
                      broker=DecisionBroker({"scripted": ScriptedBackend(DonorModel.strategies)}))


def _stored(store, run_id):
    with store.engine.connect() as c:
        return [c.execute(text(q), {"r": run_id}).all() for q in (
            "select tick, metrics, state from ticks where run_id=:r order by tick",
            "select tick, agent_id, backend, action, payoff, reward, fallback, reason, memory from agent_steps "
            "where run_id=:r order by tick, agent_id",
            "select tick, kind, actor, target, data from events where run_id=:r order by id",
            "select agent_id, joined, role, policy, strategy, persona, profile from run_agents where run_id=:r order by agent_id",
            "select tick, data from reward_vectors where run_id=:r order by tick",
            "select status, ticks, final_metrics from runs where id=:r")]


def test_a_donate_batch_holds_the_requests_observe_gives():
    """Indexing the batch gives, donor by donor and in the same order, the very requests `observe` builds."""
    model = _model(["agents=16", "rounds=4", "generations=2", "punishment=true", MIXED])
    for _ in range(3):
        model.step()
    model.update()
    model.modes = {a.unique_id: "punish" for a in list(model.agents)[::3]}
    for phase in ("action", "donate"):
        batch = model.observe_batch(phase)
        assert isinstance(batch, RequestBatch) and len(batch) == 8
        want = [r for a in model.agents if (r := model.observe(a, phase)) is not None]
        assert list(batch) == want and batch[-1] == want[-1]
        assert batch.agent_ids == [r.agent_id for r in want]
        assert batch.seeds.tolist() == [r.seed for r in want]
        assert {r.question for r in want} != {batch.question}  # each asks about its own recipient
    assert model.observe_batch("strategy") is None


def test_every_strategy_answers_a_batch_in_columns_as_it_answers_one_by_one():
    """Each strategy's columnar answers equal its one-by-one answers, the random draws and the punish mode included."""
    model = _model(["agents=16", "rounds=6", "generations=2", "punishment=true", "mutation=0.3", MIXED])
    for _ in range(13):
        model.step()
    model.update()
    model.modes = {a.unique_id: "punish" for a in list(model.agents)[::4]}
    checked = 0
    for phase in ("action", "donate"):
        batch = model.observe_batch(phase)
        for name, strategy in STRATEGIES.items():
            many = columnar_form(strategy)
            got = many(batch.view(range(len(batch))), phase, batch.seeds)
            want = [strategy(r, CounterRandom(r.seed)) for r in batch]
            assert got == want and [type(v) for v in got] == [type(v) for v in want]
            checked += len(set(got)) > 1
    assert checked >= 4  # answers that differ from donor to donor, not constants


def test_a_batch_of_some_donors_views_their_own_columns():
    """A strategy group that is not the whole batch reads its own donors' values of each column."""
    batch = RequestBatch(tick=1, phase="donate", space=Number(0, 100, 1), default=0.0, observation={"round": 1},
                         agent_ids=[1, 2, 3], strategies=["a", "b", "a"], personas=[""] * 3, seeds=[1, 2, 3],
                         columns={"fraction": np.array([0.1, 0.2, 0.3])},
                         build=lambda i: DecisionRequest(agent_id=i + 1, tick=1, phase="donate", space=Number(0, 100, 1),
                                                         default=0.0))
    assert batch.view([0, 2])["fraction"].tolist() == [0.1, 0.3] and batch.view([0, 2])["round"] == 1
    assert batch[1].agent_id == 2 and batch[-1].agent_id == 3
    with pytest.raises(ValueError, match="one value per agent"):
        RequestBatch(tick=1, phase="donate", space=Number(0, 100, 1), default=0.0, observation={}, agent_ids=[1],
                     strategies=["a"], personas=[""], seeds=[1], columns={"fraction": np.array([0.1, 0.2])},
                     build=lambda i: None)
    with pytest.raises(ValueError, match="both"):
        RequestBatch(tick=1, phase="donate", space=Number(0, 100, 1), default=0.0, observation={}, agent_ids=[1],
                     strategies=["a"], personas=[""], seeds=[1], columns={"fraction": np.array([0.1])})


def test_llm_donors_and_the_papers_prompts_are_asked_one_by_one():
    """A game with an LLM player, or under Vallinder & Hughes's prompts (a space per donor), is never batched."""
    sets = ["agents=4", "rounds=2", "generations=1", 'population=[{"count": 3, "strategy": "fixed"}, {"count": 1, "policy": "llm"}]']
    spec = build_spec("donor", sets=sets, seed=1)
    model = DonorModel(DonorModel.Config.model_validate(spec.config), seed=1, broker=DecisionBroker({}))
    assert model.observe_batch("donate") is None
    assert _model(["agents=4", "rounds=2", "generations=1", "prompts=vh2024"]).observe_batch("donate") is None
    assert _model(["agents=4", "rounds=2", "generations=1"])._columnar


STRATEGY_FILE = '''
def half(request, rng):
    return float(20 + request.agent_id % 7) if request.phase == "donate" else "give"
'''


@pytest.mark.parametrize("sets", [
    # several strategies, punishment, strong mutation over three generations
    ["agents=16", "rounds=4", "generations=3", "punishment=true", "mutation=0.3", "threshold=0.3", MIXED],
    # random gifts, a deep trace, the default mutation
    ["agents=24", "rounds=5", "generations=2", "strategy=random", "trace_depth=4"],
    # image scorers that see no trace (no reputation: never stingy), a shaped reward
    ["agents=12", "rounds=3", "generations=2", "strategy=image", "trace_depth=0", "reward_mode=cooperative"],
    # a user's strategy without columns beside the scenario's: asked one by one
    ["agents=8", "rounds=2", "generations=2", 'population=[{"count": 4, "strategy": "STRATEGY"}, {"count": 4, "strategy": "image"}]'],
])
def test_a_batched_donor_game_stores_what_asking_one_by_one_stores(sets, store, tmp_path, monkeypatch):
    """A run whose donors are asked in columns stores, byte for byte, what the one-by-one run stores."""
    (tmp_path / "mine.py").write_text(STRATEGY_FILE)
    sets = [s.replace("STRATEGY", f"{tmp_path / 'mine.py'}:half") for s in sets]
    spec = build_spec("donor", sets=sets, seed=11)
    asked = []
    batch_of = DonorModel.observe_batch
    monkeypatch.setattr(DonorModel, "observe_batch", lambda self, phase: asked.append(b := batch_of(self, phase)) or b)
    batched = execute(spec, store)
    monkeypatch.setattr(DonorModel, "observe_batch", lambda self, phase: None)
    one_by_one = execute(spec, store)
    assert batched.ticks == one_by_one.ticks > 4
    stored = _stored(store, batched.run_id)
    assert stored == _stored(store, one_by_one.run_id)
    assert any(b is not None for b in asked) == (":half" not in json.dumps(spec.config.get("population")))
    gifts = {json.loads(a).get("donate") for _, _, _, a, *_ in stored[1]} - {None}
    assert len(gifts) > 2  # the gifts differ: not a constant run
    if "punishment=true" in sets:
        assert any(kind == "norm.sanction" for _, kind, *_ in stored[2])

