"""Archetype decisions (agents.llm.archetypes): one LLM call per bucket of a tick, each agent's answer drawn from the
bucket's distribution with its own seed; runs report calls vs decisions and replay from their cache."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agents.llm.archetypes import ArchetypeBackend, ScoredLLM, candidates, draw, scored_sampling
from agents.llm.backend import LLMBackend
from agents.llm.base import Answer
from agents.llm.cache import CachedBackend
from agents.llm.factory import make_llm_backend
from agents.llm.local.llm import LocalLLM
from agents.scripted import ScriptedBackend
from analysis.divergence import divergence
from conftest import cli, cli_json
from runner.config import build_spec
from runner.execution import execute
from runner.replay import replay_run
from sim.core.contracts import DecisionRequest
from sim.core.spaces import Choice, Number, Text
from sim.store.store import Store

CHOICE = Choice(("a", "b"))


class Counting:
    """An LLM that answers every request with `value(request)` and keeps the batches it was sent."""

    model_id, sampling = "fake", {}

    def __init__(self, value) -> None:
        self.value, self.batches = value, []

    def answer(self, requests: Sequence[DecisionRequest], messages) -> list[Answer]:
        self.batches.append(list(requests))
        return [Answer(self.value(r), raw="x") for r in requests]


def _backend(p=(0.5, 0.5), text="hello"):
    """An ArchetypeBackend over two counting LLMs: distributions `p` over a, b; Text answered `text`."""
    scorer = Counting(lambda r: {"values": ["a", "b"], "p": list(p)})
    sayer = Counting(lambda r: text)
    backend = ArchetypeBackend(LLMBackend("fake", {}, llm=sayer), LLMBackend("fake", {"archetype": 1}, llm=scorer),
                               key=lambda r: r.persona)
    return backend, scorer, sayer


def _req(agent: int, persona: str = "p", space=CHOICE, seed: int | None = None) -> DecisionRequest:
    default = space.options[0] if isinstance(space, Choice) else ("x" if isinstance(space, Text) else 0)
    return DecisionRequest(agent_id=agent, tick=1, phase="act", space=space, default=default, backend="llm",
                           persona=persona, seed=agent * 7919 + 1 if seed is None else seed)


def test_agents_of_one_bucket_make_one_call():
    """Fifty requests of one persona reach the model as one request, and every agent gets an answer."""
    backend, scorer, sayer = _backend()
    got = backend.decide_batch([_req(i) for i in range(50)])
    assert [len(b) for b in scorer.batches] == [1] and not sayer.batches
    assert [d.agent_id for d in got] == list(range(50)) and {d.value for d in got} <= {"a", "b"}
    assert (backend.calls, backend.decisions) == (1, 50)


def test_two_buckets_make_two_calls():
    """Requests of two personas make exactly two calls: calls == buckets."""
    backend, scorer, _ = _backend()
    backend.decide_batch([_req(i, persona="p" if i % 2 else "q") for i in range(40)])
    assert sum(len(b) for b in scorer.batches) == 2 and backend.calls == 2 and backend.decisions == 40


def test_an_agents_answer_depends_on_its_own_seed():
    """An agent draws the same answer whoever shares its bucket, and different seeds draw both answers at p = 1/2."""
    backend, _, _ = _backend()
    alone = backend.decide_batch([_req(5)])[0].value
    crowd = backend.decide_batch([_req(i) for i in range(200)])
    assert crowd[5].value == alone
    share = sum(d.value == "a" for d in crowd) / len(crowd)
    assert 0.35 < share < 0.65
    assert backend.decide_batch([_req(5, seed=123)])[0].value == backend.decide_batch([_req(9, seed=123)])[0].value


def test_draws_follow_the_distribution():
    """A 0.9 / 0.1 distribution is drawn about 90% / 10% over many seeds, and never an answer of probability 0."""
    picks = draw([0.9, 0.1, 0.0], list(range(5000)))
    assert 0.87 < picks.count(0) / 5000 < 0.93 and 2 not in picks


def test_text_buckets_share_one_answer():
    """A Text bucket is answered once, and that answer is every agent's."""
    backend, scorer, sayer = _backend(text="we fish less")
    got = backend.decide_batch([_req(i, space=Text(10)) for i in range(30)])
    assert [len(b) for b in sayer.batches] == [1] and not scorer.batches
    assert {d.value for d in got} == {"we fish less"} and [d.agent_id for d in got] == list(range(30))


def test_an_agent_draws_only_answers_of_its_own_space():
    """An agent of the bucket whose space lacks an option never draws it (the distribution restricted to its own)."""
    backend, _, _ = _backend(p=(0.99, 0.01))
    own = Choice(("b", "c"))
    got = backend.decide_batch([_req(0)] + [_req(i, space=own) for i in range(1, 60)])
    assert {d.value for d in got[1:]} == {"b"}


def test_a_large_number_grid_is_scored_on_at_most_256_values_within_its_range():
    """A Number of 200,001 values is scored on 256 candidates from 0 to its top, every one inside the space."""
    space = Number(0, 200000, 1)
    got = candidates(space)
    assert len(got) == 256 and got[0][1] == 0 and got[-1][1] == 200000
    assert all(space.validate(v) == v for _, v in got)


def test_archetypes_off_is_the_plain_backend_and_the_spec_it_always_was(tmp_path):
    """Without `llm.archetypes` the run's backend is the cached LLM backend and the spec dumps without the field."""
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    spec = build_spec("social", sets=["agents=4"], policy="llm")
    assert "archetypes" not in spec.llm.model_dump()
    assert isinstance(make_llm_backend(spec, store, archetype=spec.scenario_class.archetype), CachedBackend)
    on = build_spec("social", sets=["agents=4"], policy="llm", llm={"archetypes": True})
    assert isinstance(make_llm_backend(on, store, archetype=on.scenario_class.archetype), ArchetypeBackend)
    assert on.digest() != spec.digest()


@pytest.fixture(scope="module")
def tiny():
    from tiny_lm import tiny_lm

    return LocalLLM(lm=tiny_lm())


def _tiny_backends(spec, store, local):
    cls = spec.scenario_class
    shared = CachedBackend(LLMBackend(local.model_id, local.sampling, llm=local), store)
    scored = CachedBackend(LLMBackend(local.model_id, scored_sampling(local.sampling), llm=ScoredLLM(local)), store)
    return {"scripted": ScriptedBackend(cls.strategies), "llm": ArchetypeBackend(shared, scored, cls.archetype)}


def test_an_archetype_run_reports_its_calls_and_replays_from_its_cache(tmp_path, tiny):
    """A social run with archetypes stores fewer calls than decisions in its summary, and replays identically."""
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    spec = build_spec("social", sets=["agents=60", "ticks=3", "activity=0.5", "text_tokens=6"], policy="llm",
                      llm={"archetypes": True})
    result = execute(spec, store, backends=_tiny_backends(spec, store, tiny))
    final = store.get_run(result.run_id).final_metrics
    assert 0 < final["archetype_calls"] < final["archetype_decisions"]
    assert len(store.llm_calls(result.run_id)) == final["archetype_calls"]
    report = replay_run(store, result.run_id)
    assert report["matched"] and report["ticks"] == 3


def _flat(r: DecisionRequest):
    """A Text answer, or a flat distribution over the request's answers (a stand-in model: no weights)."""
    got = candidates(r.space)
    return f"a view {r.agent_id % 3}" if got is None else {"values": [v for _, v in got], "p": [1 / len(got)] * len(got)}


def _social_prompts(tmp_path, name: str, defer: bool, monkeypatch) -> tuple[list[tuple], int, int]:
    """A 300-member social run with archetypes over stand-in models: (its stored calls' prompts, the feeds rendered,
    the requests the models were sent); `defer`: whether the backend takes requests without their text."""
    from scenarios.social import prompts

    rendered = []
    real = prompts.feed_context
    monkeypatch.setattr(prompts, "feed_context", lambda *a: rendered.append(1) or real(*a))
    store = Store(f"sqlite:///{tmp_path / name}")
    spec = build_spec("social", sets=["agents=300", "ticks=3", "activity=0.5"], policy="llm", llm={"archetypes": True})
    sayer, scorer = Counting(_flat), Counting(_flat)
    backend = ArchetypeBackend(CachedBackend(LLMBackend("fake", {}, llm=sayer), store),
                               CachedBackend(LLMBackend("fake", scored_sampling({}), llm=scorer), store), spec.scenario_class.archetype)
    backend.defers_prompts = defer
    run = execute(spec, store, backends={"scripted": ScriptedBackend(spec.scenario_class.strategies), "llm": backend}).run_id
    calls = sorted((c.tick, c.phase, c.agent_id, c.prompt) for c in store.llm_calls(run))
    sent = sum(len(b) for b in sayer.batches + scorer.batches if b and b[0].phase != "stance")
    return calls, len(rendered), sent


def test_only_each_buckets_first_prompt_is_rendered_and_it_is_the_prompt_it_always_was(tmp_path, monkeypatch):
    """With archetypes a member's feed is rendered only for its bucket's first request, and the prompts sent are
    those of a run that renders every member's."""
    every, all_rendered, _ = _social_prompts(tmp_path, "all.db", False, monkeypatch)
    firsts, rendered, sent = _social_prompts(tmp_path, "firsts.db", True, monkeypatch)
    assert firsts == every and all(prompt for *_, prompt in firsts)
    assert rendered == sent < all_rendered / 5


def test_a_probes_request_under_archetypes_carries_its_prompt(tmp_path):
    """A probe's request is made whole (its question there to reword, nothing left to render from the freed model),
    also where the run's LLM backend takes requests without their text."""
    from runner.probing import _situate, plan_probes
    from sim.tick.broker import DecisionBroker

    store = Store(f"sqlite:///{tmp_path / 'probe.db'}")
    spec = build_spec("social", sets=["agents=30"], policy="llm", llm={"archetypes": True})
    backend = ArchetypeBackend(CachedBackend(LLMBackend("fake", {}, llm=Counting(_flat)), store), None,
                               spec.scenario_class.archetype)
    broker = DecisionBroker({"scripted": ScriptedBackend(spec.scenario_class.strategies), "llm": backend})
    cls, probes, configs = plan_probes(spec, ["upvote_by_distance"], seeds=10)
    request = _situate(cls, probes[0], configs[0], spec, spec.seed, probes[0].levels[0], broker)
    assert request.render is None and request.question and request.context


def test_social_members_share_a_bucket_by_the_stance_their_prompt_words():
    """Opinions 0.41 and 0.59 (both "neutral" in the prompt) share a choose bucket; 0.39 ("against") does not."""
    from scenarios.social.archetypes import archetype

    def key(opinion: float):
        return archetype(DecisionRequest(agent_id=1, tick=1, phase="choose", space=CHOICE, default="a", persona="p",
                                         observation={"opinion": opinion, "feed_forum": "general"}))

    assert key(0.41) == key(0.59) != key(0.39)


def test_divergence_is_zero_for_equal_series_and_relative_otherwise():
    """Equal series diverge by 0; 10 vs 5 by 0.5; 0 vs 3 by 1; clock metrics and archetype counts are left out."""
    a = {1: {"x": 10.0, "y": 0.0, "tick": 1, "archetype_calls": 3}, 2: {"x": 10.0, "y": 0.0, "tick": 2}}
    b = {1: {"x": 5.0, "y": 3.0, "tick": 1, "archetype_calls": 9}, 2: {"x": 10.0, "y": 3.0, "tick": 2}}
    assert divergence(a, a, skip={"tick"})["divergence"] == 0
    got = divergence(a, b, skip={"tick"})
    assert got["metrics"] == {"x": 0.25, "y": 1.0} and got["divergence"] == pytest.approx(0.625) and got["ticks"] == 2


def test_compare_runs_reports_divergence_and_refuses_bad_input(db_url):
    """`compare-runs A B` gives a divergence in [0, 1] with each run's calls; an unknown run is one line, exit 2."""
    a = cli_json("run", "commons", "--set", "months=4", db=db_url)["run_id"]
    b = cli_json("run", "commons", "--set", "months=4", "--seed", "1", "--set", "strategy=random", db=db_url)["run_id"]
    got = cli_json("compare-runs", a, b, db=db_url)
    assert 0 < got["divergence"] <= 1 and got["run_a"] == a and set(got["llm"]) == {a, b}
    assert cli_json("compare-runs", a, a, db=db_url)["divergence"] == 0
    bad = cli("compare-runs", a, "nope", db=db_url)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and len(bad.stderr.strip().splitlines()) == 1


def test_probes_decide_per_agent_even_when_the_run_buckets_its_requests(tmp_path):
    """A run with llm.archetypes buckets its LLM requests; the backends a probe of it uses do not (a social choose
    key is blind to the probed post's stance, so one bucket would answer every level alike)."""
    from runner.backends import make_backends

    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    spec = build_spec("social", sets=["agents=30"], policy="llm", llm={"archetypes": True})
    cls = spec.scenario_class
    assert isinstance(make_backends(spec, cls, store)["llm"], ArchetypeBackend)
    assert not isinstance(make_backends(spec, cls, store, per_agent=True)["llm"], ArchetypeBackend)


def test_run_probes_asks_for_per_agent_backends(tmp_path, monkeypatch):
    """`run_probes` builds its default backends with per_agent=True (stopped right there: a stand-in records it)."""
    import runner.probing as probing

    asked = {}

    class Stop(Exception):
        pass

    def record(spec, cls, store, **kw):
        asked.update(kw)
        raise Stop

    monkeypatch.setattr(probing, "make_backends", record)
    spec = build_spec("social", sets=["agents=30"], policy="llm", llm={"archetypes": True})
    with pytest.raises(Stop):
        probing.run_probes(spec, Store(f"sqlite:///{tmp_path / 'p.db'}"), names=["upvote_by_distance"], seeds=10)
    assert asked.get("per_agent") is True
