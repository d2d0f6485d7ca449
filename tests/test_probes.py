"""Validity probes (`societas probe`): matched requests that differ in one variable, answered by the study's backend.

A fake LLM whose answers follow the probed variable must be detected as responding, with the effect's sign the
variable gives; one whose answers ignore it must not. Every probe of every scenario ships a control blind to its
variable and one that follows it, and reads them as it must. The probe goes through the LLM backend and the
store's cache, is stored as a run of origin `probe`, and has no world to replay. Rewordings of the instructions
(`--paraphrases`) change the question and the built-in system text, never a fact.
"""

from __future__ import annotations

import dataclasses
import json
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
from runner.config import build_spec
from runner.probing import run_probes
from runner.replay import replay_run
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


def _zaps_when_scarce(r: DecisionRequest) -> str:
    return "beam" if r.observation["view"].world.alive_apples().mean() < 0.3 else "stand"


#: scenario -> (a rule following the probed variable, the effect's sign it gives, a rule ignoring it)
RULES = {
    "commons": (lambda r: float(math.floor(r.observation["stock"] / 10)), +1, lambda r: 1.0),
    "donor": (lambda r: 100.0 * (r.observation["last_gift"] or 0.0), +1, lambda r: 10.0),
    "market": (_cheapest, -1, lambda r: r.observation["proposals"][0]["option"]),
    "social": (_agrees, -1, lambda r: "idle"),
    "gathering": (_zaps_when_scarce, -1, lambda r: "stand"),
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
                       (["probe", "commons", "--seeds", "1", "--policy", "scripted"], "--seeds must be"),
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

    from runner.execution import execute

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


# ----- the instrument: controls, bounds, intervals ----------------------------------------------------------------
PROBED = sorted(n for n in ("commons", "donor", "market", "social", "gathering", "cleanup") if get_scenario(n).probes)


@pytest.mark.parametrize("scenario", PROBED)
def test_every_probe_reads_its_blind_control_as_not_responding_and_its_following_one_as_responding(scenario, tmp_path):
    """Both controls answer the very requests of every probe: the blind one must not respond, the other must."""
    from societas.testing import check_probes

    results = check_probes(scenario, store=Store(f"sqlite:///{tmp_path / 'runs.db'}"))
    assert results and all(r.valid for r in results)
    for r in results:
        assert not r.controls["blind"]["responds"] and r.controls["blind"]["ok"], (r.name, r.controls["blind"])
        assert r.controls["follows"]["responds"] and r.controls["follows"]["ok"], (r.name, r.controls["follows"])


@pytest.mark.parametrize("scenario", PROBED)
def test_every_level_of_a_seed_asks_the_same_agent_in_the_same_action_space(scenario):
    """A bound that moved with the variable could make a response: each seed's requests share space, agent and seed."""
    cls = get_scenario(scenario)
    for probe in cls.probes:
        config = cls.Config(**probe.config)
        world = probe.world(cls, config) if probe.world else cls
        for seed in (0, 1, 2):
            asked = [probe.situate(world(config, seed=seed, broker=DecisionBroker({}), policy="llm"), level)
                     for level in probe.levels]
            assert len({repr(r.space) for r in asked}) == 1, (probe.name, [r.space for r in asked])
            assert len({(r.agent_id, r.seed, r.phase, r.persona) for r in asked}) == 1, probe.name


def test_a_catch_blind_to_the_stock_reads_the_same_at_every_stock(tmp_path):
    """The issue's artifact: a fixed 20-ton catch read 10 / 20 / 20 ("responds") when the catch was capped at the
    stock; asked in one space at every level it reads 20 / 20 / 20 and does not respond."""
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    got = run_probes(build_spec("commons", policy="scripted", sets=["strategy=fixed", "catch=20"]), store, seeds=10)
    r = got.results[0]
    assert r.means == [20.0, 20.0, 20.0] and r.effect == 0 and not r.responds and not r.varied and r.valid


def test_the_market_probes_three_offers_meet_every_required_amenity_in_every_seed():
    """The promise "three offers that meet every need" holds in 100 seeds of the synthetic market: each proposal holds
    every requested item and comes from a business with every required amenity, which its listing says."""
    from scenarios.market.probes import CHOICE_BY_PRICE

    cls = get_scenario("market")
    config = cls.Config(**CHOICE_BY_PRICE.config)
    for seed in range(100):
        model = cls(config, seed=seed, broker=DecisionBroker({}), policy="llm")
        request = CHOICE_BY_PRICE.situate(model, 1.0)
        shopper = next(s for s in model.shoppers if s.proposals)
        customer = shopper.customer
        assert len(shopper.proposals) == 3 and all(p["full"] and p["amenities"] for p in request.observation["proposals"])
        for p in shopper.proposals:
            business = model.sellers[p.business].business
            assert business.has_amenities(customer.amenities) and set(p.items) == set(customer.items), seed
        listed = [line for line in request.context.splitlines() if line[:3] in ("1. ", "2. ", "3. ")]
        assert len(listed) == 3 and all(model.named(a) in line for line in listed for a in customer.amenities), seed


def test_a_rate_never_seen_reads_a_wilson_interval_not_zero_width(tmp_path):
    """0 beams of 10 at every level: each level's interval is Wilson's [0, z^2/(n+z^2)] and the effect's Newcombe's
    [-0.2775, 0.2775], not [0, 0]."""
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    r = run_probes(build_spec("gathering", policy="scripted", sets=["strategy=greedy"]), store, seeds=10).results[0]
    z2 = 1.959963984540054 ** 2
    assert r.means == [0.0, 0.0, 0.0] and not r.responds and r.method == "newcombe"
    assert r.level_lo == [0.0] * 3 and r.level_hi == pytest.approx([z2 / (10 + z2)] * 3)
    assert r.lo == pytest.approx(-z2 / (10 + z2)) and r.hi == pytest.approx(z2 / (10 + z2))


def test_newcombes_paired_interval_holds_its_estimate_stays_in_bounds_and_flips_with_its_sign():
    """The paired interval of a rate difference contains its estimate, lies in [-1, 1], negates when the levels swap,
    narrows with more pairs, and is zero-width for no table."""
    import random

    from sim.reward.intervals import paired_rate_difference

    rng = random.Random(3)
    for n in (10, 30, 200):
        first = [float(rng.random() < 0.3) for _ in range(n)]
        last = [float(rng.random() < 0.6) for _ in range(n)]
        ci, swapped = paired_rate_difference(first, last), paired_rate_difference(last, first)
        assert -1 <= ci["lo"] <= ci["mean"] <= ci["hi"] <= 1 and ci["lo"] < ci["hi"]
        assert swapped["lo"] == pytest.approx(-ci["hi"]) and swapped["hi"] == pytest.approx(-ci["lo"])
    wide = paired_rate_difference([0.0, 1.0] * 5, [0.0, 1.0] * 5)
    narrow = paired_rate_difference([0.0, 1.0] * 100, [0.0, 1.0] * 100)
    assert wide["hi"] > narrow["hi"] > 0 > narrow["lo"] > wide["lo"]
    with pytest.raises(ValueError):
        paired_rate_difference([0.5], [1.0])


@pytest.mark.parametrize("config_file", [None, "scenarios/commons/configs/govsim.yaml"])
def test_the_fishery_probe_asks_one_fisher_of_a_large_fishery_exactly_as_the_whole_fishery_would(config_file):
    """A probe's cost must not grow with the population: its world builds one fisher whose request equals, field for
    field and word for word, the one a fishery of 37 fishers gives."""
    from conftest import ROOT

    cls = get_scenario("commons")
    spec = build_spec("commons", config_file=str(ROOT / config_file) if config_file else None, sets=["fishers=37"])
    config = cls.Config.model_validate({**spec.config, **CATCH_BY_STOCK.config})
    small = CATCH_BY_STOCK.world(cls, config)
    assert small is not cls
    for seed in (0, 5):
        whole = cls(config, seed=seed, broker=DecisionBroker({}), policy="llm")
        one = small(config, seed=seed, broker=DecisionBroker({}), policy="llm")
        assert len(one.agents) == 1 and len(whole.agents) == 37
        assert CATCH_BY_STOCK.situate(one, 30.0) == CATCH_BY_STOCK.situate(whole, 30.0)
    huge = cls.Config.model_validate({**config.model_dump(), "fishers": 1_000_000})
    one = small(huge, seed=0, broker=DecisionBroker({}), policy="llm")
    request = CATCH_BY_STOCK.situate(one, 30.0)
    told = "999999 other fishermen" if config.protocol == "govsim" else "1000000 fishers"  # (GovSim's words: the others)
    assert len(one.agents) == 1 and request.observation["fishers"] == 1_000_000
    assert told in request.context + request.own_context


# ----- paraphrases --------------------------------------------------------------------------------------------------
def _llm_requests(scenario: str) -> list[tuple[object, DecisionRequest, dict]]:
    """(probe, request, facts) of every probe of `scenario` for an LLM policy (and the synthesis program's request)."""
    cls = get_scenario(scenario)
    out = []
    for probe in cls.probes:
        config = cls.Config(**probe.config)
        model = cls(config, seed=1, broker=DecisionBroker({}), policy="llm")
        request = probe.situate(model, probe.levels[0])
        out.append((probe, request, dict(probe.facts(model, request))))
        if probe.prelude is not None:
            model = cls(config, seed=1, broker=DecisionBroker({}), policy="synthesis")
            request = probe.prelude.ask(model)
            out.append((probe, request, dict(probe.facts(model, request))))
    return out


@pytest.mark.parametrize("scenario", PROBED)
def test_a_rewording_changes_the_question_and_the_builtin_system_text_and_no_fact(scenario):
    """Under every rewording the rendered prompt differs from the original in its question and system text alone;
    every number of the question is kept; the request is otherwise the same (situation, persona, space)."""
    import re

    from agents.llm.prompts import DEFAULT, render_messages
    from runner.paraphrase import MAX_PARAPHRASES, SYSTEM_REWORDINGS, RewordedSystem, reword_question

    for probe, request, facts in _llm_requests(scenario):
        original = render_messages(request, DEFAULT)
        for k in range(1, MAX_PARAPHRASES + 1):
            new, changed = reword_question(request, probe.questions, facts, k)
            assert changed and new.question != request.question, (probe.name, request.phase, k)
            assert dataclasses.replace(new, question=request.question) == request
            assert set(re.findall(r"\d+", request.question)) <= set(re.findall(r"\d+", new.question))
            system, user = RewordedSystem(DEFAULT, SYSTEM_REWORDINGS[k - 1])(new)
            assert system == {"role": "system", "content": SYSTEM_REWORDINGS[k - 1]}
            assert user["content"].replace(new.question, request.question) == original[1]["content"]


def test_a_question_or_system_text_of_a_configs_own_is_never_reworded():
    """A question the scenario's bank does not know, and a system text that is not the built-in one (it may hold a
    persona, a price), stay as they are."""
    from agents.llm.prompts import PromptTemplate
    from runner.paraphrase import RewordedSystem, reword_question

    _, request, facts = _llm_requests("commons")[0]
    own = dataclasses.replace(request, question="You are John, a fisher. How many tons (0-100) do you catch?")
    assert reword_question(own, CATCH_BY_STOCK.questions, facts, 1) == (own, False)
    persona = PromptTemplate(system="You are John, a fisherman who earns $2 a ton.")
    reworded = RewordedSystem(persona, "Another system text.")
    assert reworded(request)[0]["content"] == persona.system and not reworded.rewords(request)


class WordingSensitive(RuleLLM):
    """Follows the stock under the built-in system text and answers 5 tons under any other."""

    def answer(self, requests, messages):
        from runner.paraphrase import BUILTIN_SYSTEM

        self.batches.append(len(requests))
        return [Answer(self.rule(r) if m[0]["content"] in BUILTIN_SYSTEM else 5.0, raw="rule")
                for r, m in zip(requests, messages)]


def test_paraphrases_report_each_wordings_effect_its_spread_and_a_flip(tmp_path):
    """Under K rewordings each wording is one more batch with its own prompts (so its own cache keys); a model whose
    answer hangs on the wording is reported as flipping, with the effect's range."""
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    spec = build_spec("commons", policy="llm")
    steady = RuleLLM("steady", RULES["commons"][0])
    r = run_probes(spec, store, seeds=10, paraphrases=2, backends=_backends("commons", store, steady)).results[0]
    assert steady.batches == [30, 30, 30] and len(r.wordings) == 3 and not r.flips and r.spread() == (9.0, 9.0)
    assert all(w["reworded"] == {"question": True, "system": True} for w in r.wordings[1:])
    fickle = WordingSensitive("fickle", RULES["commons"][0])
    got = run_probes(spec, store, seeds=10, paraphrases=2, backends=_backends("commons", store, fickle))
    r = got.results[0]
    assert r.responds and r.flips and [w["responds"] for w in r.wordings] == [True, False, False]
    assert r.spread() == (0.0, 9.0) and "flips under rewording 1, 2" in r.verdict()
    assert store.get_run(got.run_id).final_metrics["catch_by_stock.flips"] == 1.0
    bad = ((["--paraphrases", "9"], "--paraphrases must be"),
           (["--paraphrases", "1", "--policy", "scripted"], "asks no LLM"))
    for args, says in bad:
        proc = cli("probe", "commons", *args, db=f"sqlite:///{tmp_path / 'cli.db'}")
        assert proc.returncode == 2 and says in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "cli.db").exists()


def test_a_synthesised_program_is_probed_on_matched_views_each_in_a_fresh_sandbox(tmp_path):
    """Under --policy synthesis the LLM writes one program per seed (the prelude) and that program answers every level;
    a refused program leaves its seed out as fallbacks."""
    from agents.sandbox.backend import CodeBackend

    code = ("```python\n"
            "def policy(obs):\n"
            "    if obs.apple_alive.mean() < 0.3 and len(beam_targets(obs)) > 0:\n"
            "        return BEAM\n"
            "    return STAND\n"
            "```")
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    writer = RuleLLM("writer", lambda r: code)
    backends = {**_backends("gathering", store, writer), "synthesis": CodeBackend()}
    r = run_probes(build_spec("gathering", policy="synthesis"), store, seeds=10, backends=backends).results[0]
    assert writer.batches == [10] and r.means == [1.0, 0.0, 0.0] and r.responds and r.valid and r.fallbacks == 0
    mute = RuleLLM("mute", lambda r: "I would rather not write code.")
    backends = {**_backends("gathering", store, mute), "synthesis": CodeBackend()}
    r = run_probes(build_spec("gathering", policy="synthesis"), store, seeds=10, backends=backends).results[0]
    assert r.fallbacks == 30 and r.seeds == 0 and not r.responds and r.verdict().startswith("no usable answer")


@pytest.mark.slow
@pytest.mark.parametrize("scenario", PROBED)
def test_every_probe_runs_under_a_rewording_on_the_embedded_model(scenario, tmp_path):
    """The real SmolLM2 answers every probe of every scenario under its wording and one rewording; the controls hold."""
    proc = cli("probe", scenario, "--seeds", "10", "--paraphrases", "1", "--json", db=f"sqlite:///{tmp_path / 'runs.db'}",
               timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    for p in report["probes"]:
        assert p["valid"] and len(p["wordings"]) == 2 and p["wordings"][1]["reworded"] == {"question": True, "system": True}
        assert p["seeds"] + p["fallbacks"] >= 10 and (p["spread"] is None or len(p["spread"]) == 2), p["name"]


@pytest.mark.slow
def test_a_program_the_embedded_model_writes_is_probed(tmp_path):
    """Under --policy synthesis the real SmolLM2 writes one short program per seed (reworded once too); programs it
    could not write are counted as fallbacks, and the controls hold."""
    proc = cli("probe", "gathering", "--policy", "synthesis", "--seeds", "10", "--paraphrases", "1",
               "--set", "code_tokens=64", "--json", db=f"sqlite:///{tmp_path / 'runs.db'}", timeout=1800)
    assert proc.returncode == 0, proc.stderr[-2000:]
    p = json.loads(proc.stdout)["probes"][0]
    assert p["valid"] and len(p["wordings"]) == 2 and (p["seeds"] == 10 or p["fallbacks"] > 0)


def test_a_probe_whose_bound_moves_with_its_variable_is_refused():
    """The old fishery probe asked the catch from 0 to the stock: a runner given such a probe stops, naming the spaces."""
    from runner.probing import probe_once

    def capped(model, level):  # the scenario's own request: its catch space is 0 to the stock
        model.stock = model.stock_start = float(level)
        return model.observe(min(model.agents, key=lambda a: a.unique_id), "harvest")

    cls = get_scenario("commons")
    broken = dataclasses.replace(CATCH_BY_STOCK, situate=capped)
    spec = build_spec("commons", policy="scripted")
    config = cls.Config.model_validate({**spec.config, **CATCH_BY_STOCK.config})
    with pytest.raises(RuntimeError, match="different action spaces"):
        probe_once(cls, broken, config, spec, 10, DecisionBroker({"scripted": ScriptedBackend(cls.strategies)}))
