"""Validity probes (`societas probe`): matched requests that differ in one variable, answered by the study's backend.

A fake LLM whose answers follow the probed variable must be detected as responding, with the effect's sign the
variable gives; one whose answers ignore it must not. The probe goes through the LLM backend and the store's
cache, is stored as a run of origin `probe`, and has no world to replay.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest

from agents.llm.backend import LLMBackend
from agents.llm.base import Answer, Messages
from agents.llm.cache import CachedBackend
from agents.scripted import ScriptedBackend
from conftest import cli
from scenarios.commons.probes import CATCH_BY_STOCK
from scenarios.registry import get_scenario
from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from sim.runner.config import build_spec
from sim.runner.probing import run_probes
from sim.runner.replay import replay_run
from sim.store.store import Store
from sim.tick.broker import DecisionBroker


class RuleLLM:
    """An LLM played by a rule over the request's structured observation (what the prompt shows it)."""

    def __init__(self, name: str, rule: Callable[[DecisionRequest], object]) -> None:
        self.model_id = f"rule-{name}"
        self.sampling = {"rule": name}
        self.rule = rule
        self.batches: list[int] = []

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        self.batches.append(len(requests))
        return [Answer(self.rule(r), raw="rule") for r in requests]


def _cheapest(r: DecisionRequest) -> str:
    return min(r.observation["proposals"], key=lambda p: (p["total"], p["rank"]))["option"]


def _agrees(r: DecisionRequest) -> str:
    o = r.observation
    return "upvote 1" if abs(o["stances"][0] - o["opinion"]) < 0.2 else "idle"


#: scenario -> (a rule following the probed variable, the effect's sign it gives, a rule ignoring it)
RULES = {
    "commons": (lambda r: float(math.floor(r.observation["stock"] / 10)), +1, lambda r: 1.0),
    "donor": (lambda r: 100.0 * (r.observation["last_gift"] or 0.0), +1, lambda r: 10.0),
    "market": (_cheapest, -1, lambda r: r.observation["proposals"][0]["option"]),
    "social": (_agrees, -1, lambda r: "idle"),
}


def _backends(scenario: str, store: Store, llm: RuleLLM) -> dict:
    cls = get_scenario(scenario)
    return {"scripted": ScriptedBackend(cls.strategies),
            "llm": CachedBackend(LLMBackend(llm.model_id, llm.sampling, llm=llm), store, None)}


@pytest.mark.parametrize("scenario", sorted(RULES))
def test_a_probe_detects_a_decision_that_follows_its_variable_and_not_one_that_ignores_it(scenario, tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    follows, sign, ignores = RULES[scenario]
    spec = build_spec(scenario, policy="llm")
    got = run_probes(spec, store, seeds=10, backends=_backends(scenario, store, RuleLLM("follows", follows))).results
    assert got and all(r.responds and r.varied and math.copysign(1, r.effect) == sign for r in got)
    assert all((r.lo > 0) if sign > 0 else (r.hi < 0) for r in got)
    flat = run_probes(spec, store, seeds=10, backends=_backends(scenario, store, RuleLLM("ignores", ignores))).results
    assert all(not r.responds and r.effect == 0 and not r.varied for r in flat)


def test_a_probe_is_one_batch_stored_cached_and_not_replayable(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    llm = RuleLLM("follows", RULES["commons"][0])
    spec = build_spec("commons", policy="llm")
    first = run_probes(spec, store, seeds=10, backends=_backends("commons", store, llm))
    assert llm.batches == [30]  # 3 levels x 10 seeds, one batch
    run = store.get_run(first.run_id)
    assert run.origin == "probe" and run.status == "finished" and run.final_metrics["catch_by_stock.responds"] == 1.0
    steps = store.steps(first.run_id)  # the stored decisions: one agent step per request, its response the payoff
    assert run.ticks == 1 and len(steps) == 30 and {s.payoff for s in steps} == {1.0, 3.0, 10.0}
    again = run_probes(spec, store, seeds=10, backends=_backends("commons", store, llm))
    assert llm.batches == [30], "a rerun is answered from the cache"
    assert [r.to_json() for r in again.results] == [r.to_json() for r in first.results]
    with pytest.raises(UsageError, match="validity probe"):
        replay_run(store, first.run_id)


class FailingAtLowStock(RuleLLM):
    """Answers 15 tons whatever the stock, except that at stock 10 its answer cannot be used (a fallback)."""

    def answer(self, requests, messages):
        self.batches.append(len(requests))
        return [Answer(0.0, raw="15 tons", error="out of range") if r.observation["stock"] == 10 else Answer(15.0, raw="15")
                for r in requests]


def test_a_fallback_answer_is_left_out_of_the_verdict(tmp_path):
    """A model that says 15 tons at every stock is not responding, though its unusable answer at stock 10 became the
    default 0: the seeds with a fallback are left out, and counted."""
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    llm = FailingAtLowStock("fails-low", lambda r: 15.0)
    got = run_probes(build_spec("commons", policy="llm"), store, seeds=10, backends=_backends("commons", store, llm))
    r = got.results[0]
    assert r.fallbacks == 10 and r.seeds == 0 and not r.responds and r.effect is None


def test_the_requests_of_one_seed_differ_only_in_the_probed_variable(tmp_path):
    """Matched counterfactuals: the commons requests at stock 10 and 100 share the decision seed, agent and question."""
    cls = get_scenario("commons")
    config = cls.Config(**CATCH_BY_STOCK.config)
    broker = DecisionBroker({"scripted": ScriptedBackend(cls.strategies)})
    low, high = (CATCH_BY_STOCK.situate(cls(config, seed=4, broker=broker, policy="llm"), level) for level in (10.0, 100.0))
    assert (low.seed, low.agent_id, low.question, low.persona) == (high.seed, high.agent_id, high.question, high.persona)
    assert low.observation["stock"] == 10.0 and high.observation["stock"] == 100.0
    assert {k: v for k, v in low.observation.items() if k != "stock"} == {k: v for k, v in high.observation.items() if k != "stock"}
    assert low.context.replace("10 tons", "100 tons") == high.context  # the prompt differs in the stock alone


def test_bad_probe_input_is_one_line_and_stores_nothing(tmp_path):
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    for args, says in ((["probe", "commons", "--probe", "nope", "--policy", "scripted"], "unknown probe 'nope'"),
                       (["probe", "commons", "--seeds", "1", "--policy", "scripted"], "--seeds (seeds=) must be"),
                       (["probe", "nosuch", "--policy", "scripted"], "unknown scenario"),
                       (["probe", "donor", "--set", "agents=2", "--set", "rounds=2", "--policy", "scripted"],
                        "needs at least 3 players")):
        proc = cli(*args, db=db)
        assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    done = cli("probe", "donor", "--policy", "scripted", "--set", "strategy=image", "--seeds", "10", db=db)
    assert done.returncode == 0 and "gift_by_reputation" in done.stdout and "yes" in done.stdout, done.stdout


def test_a_scenario_without_probes_says_how_to_add_one(tmp_path):
    from test_user_scenarios import write_scenario

    path = write_scenario(tmp_path)
    proc = cli("probe", f"{path}:Auction", "--policy", "scripted", db=f"sqlite:///{tmp_path / 'runs.db'}")
    assert proc.returncode == 2 and "declares no validity probes" in proc.stderr and "docs/probes.md" in proc.stderr
    assert not (tmp_path / "runs.db").exists()



def test_models_are_freed_after_a_run_and_after_a_probe(tmp_path):
    """Mesa counts agent ids in a class-level dict keyed by model; a process running many runs (a sweep worker) or
    building many models (a probe) must not keep every model alive through it."""
    import gc
    import weakref

    import mesa

    from sim.runner.execution import execute

    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    before = set(map(id, mesa.Agent._ids))  # noqa: SLF001 - what the fix is about
    alive = []
    original = get_scenario("commons").__init__

    def tracked(self, *args, **kwargs):
        original(self, *args, **kwargs)
        alive.append(weakref.ref(self))

    cls = get_scenario("commons")
    cls.__init__ = tracked
    try:
        execute(build_spec("commons", seed=1, ticks=2), store)
        run_probes(build_spec("commons", policy="scripted"), store, seeds=10)
    finally:
        cls.__init__ = original
    gc.collect()
    assert len(alive) > 30 and not any(ref() is not None for ref in alive)
    assert set(map(id, mesa.Agent._ids)) <= before  # noqa: SLF001


def test_the_api_probes_and_stores(tmp_path):
    import sim

    db = f"sqlite:///{tmp_path / 'runs.db'}"
    report = sim.probe("donor", db=db, policy="scripted", strategy="image")
    assert report.results[0].responds and report.results[0].effect == pytest.approx(0.5)
    assert sim.runs(db).set_index("run_id").loc[report.run_id, "status"] == "finished"
    with pytest.raises(sim.UsageError, match="seeds"):
        sim.probe("donor", db=db, policy="scripted", seeds=3)
