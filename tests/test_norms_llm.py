"""The embedded model (SmolLM2-135M on CPU) plays the donor game across generations and votes on a norm."""

import pytest

from agents.llm.cache import CachedBackend

from agents.llm.backend import LLMBackend
from agents.llm.local.llm import LocalLLM
from agents.scripted import ScriptedBackend
from scenarios import get_scenario
from runner.config import build_spec
from runner.execution import execute

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def lm():
    from agents.llm.local.model import shared_lm

    return shared_lm()


def _run(store, lm, spec):
    engine = LocalLLM(lm=lm)
    cls = get_scenario(spec.scenario)
    backends = {"scripted": ScriptedBackend(cls.strategies),
                "llm": CachedBackend(LLMBackend(engine.model_id, engine.sampling, llm=engine), store)}
    return execute(spec, store, backends=backends)


def test_llm_plays_two_generations_of_the_donor_game(store, lm):
    """4 LLM players, 2 rounds a game, 2 generations: strategies written, every gift a valid percent, no fallback."""
    spec = build_spec("donor", policy="llm", seed=1, sets=["agents=4", "rounds=2", "generations=2"])
    r = _run(store, lm, spec)
    assert r.status == "finished" and r.ticks == 8
    steps = store.steps(r.run_id)
    assert not any(s.fallback for s in steps)
    gifts = [s.action["donate"] for s in steps if "donate" in s.action]
    assert len(gifts) == 2 * 8 and all(0 <= g <= 100 and float(g).is_integer() for g in gifts)
    written = [e for e in store.events(r.run_id) if e.kind == "norm.statement"]
    assert [e.tick for e in written] == [1] * 4 + [5] * 2  # generation 1 all write; generation 2 the two newcomers
    assert all(e.data["text"] for e in written)
    newcomer_prompts = [c.prompt for c in store.llm_calls(r.run_id) if c.phase == "strategy" and c.tick == 5]
    survivors = {e.data["text"][:30] for e in written if e.tick == 1}
    assert newcomer_prompts and all(any(t in p for t in survivors) for p in newcomer_prompts)
    assert r.metrics["avg_final_resources_gen_2"] is not None


def test_llm_fishers_propose_and_vote_on_a_catch_limit(store, lm):
    """One month of norm formation by 5 LLM fishers: proposals and votes all valid, the tally recorded."""
    spec = build_spec("commons", policy="llm", seed=2, sets=["months=1", "norm_formation=true", "disposition=altruistic"])
    r = _run(store, lm, spec)
    steps = store.steps(r.run_id)
    assert len(steps) == 5 and not any(s.fallback for s in steps)
    events = store.events(r.run_id)
    proposals = {e.actor: e.data["rule"]["max_catch"] for e in events if e.kind == "norm.statement"}
    assert len(proposals) == 5 and all(0 <= v <= 100 for v in proposals.values())
    votes = [e.data["limit"] for e in events if e.kind == "vote"]
    assert len(votes) == 5 and set(votes) <= set(proposals.values())
    result = [e.data for e in events if e.kind == "vote.result"]
    assert len(result) == 1 and sum(result[0]["tally"].values()) == 5
