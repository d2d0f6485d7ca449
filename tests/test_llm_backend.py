"""The LLM backend without a real model: parsing, retries, fallbacks, timeouts, cache, unreachable servers."""

import threading
import time
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from agents.llm.cache import CachedBackend

from sim.contracts.backend import ReplayMode

from agents.llm.backend import Answer, LLMBackend
from agents.llm.keys import cache_key
from agents.llm.chat import ChatLLM
from agents.llm.parse import parse_answer
from agents.scripted import ScriptedBackend
from scenarios import get_scenario
from sim.contracts.backend import BackendUnavailable
from runner.config import build_spec
from sim.core.contracts import DecisionRequest
from runner.execution import RunFailed, execute
from sim.core.spaces import Choice, Form, Number, SpaceError, Text

NUM = Number(0, 20, 1)


def req(agent=1, space=NUM, default=0.0, seed=1, question="How many?"):
    return DecisionRequest(agent_id=agent, tick=1, phase="harvest", space=space, default=default, backend="llm",
                           context="A lake.", question=question, seed=seed)


def engine(chat, **kw):
    kw.setdefault("backoff_s", 0.01)
    return ChatLLM(chat, "fake", **kw)


def test_parse_answer_per_space():
    """Numbers, options and JSON forms are read out of free text; garbage is refused."""
    assert parse_answer("I will catch 7 tons.", NUM) == 7.0
    assert parse_answer('{"answer": 3}', NUM) == 3.0
    assert parse_answer("I choose to cooperate.", Choice(["cooperate", "defect"])) == "cooperate"
    assert parse_answer('{"give": 2, "to": "b"}', Form({"give": NUM, "to": Choice(["a", "b"])})) == {"give": 2.0, "to": "b"}
    for text, space in [("lots", NUM), ("99", NUM), ("cooperate or defect", Choice(["cooperate", "defect"])), ("", Text(5))]:
        with pytest.raises(SpaceError):
            parse_answer(text, space)


def test_unparseable_answer_is_retried_then_used():
    """A first answer that cannot be parsed is retried; the second, valid one is used."""
    chat = FakeListChatModel(responses=["banana", "12"])
    [a] = engine(chat, max_concurrency=1).answer([req()], [[{"role": "user", "content": "q"}]])
    assert a.value == 12.0 and a.error is None and a.attempts == 2


def test_persistently_unparseable_answer_falls_back_visibly(store):
    """After the bounded retries the scenario default is used and the decision is marked fallback."""
    chat = FakeListChatModel(responses=["banana"])
    backend = CachedBackend(LLMBackend("fake", {}, llm=engine(chat, max_retries=2)), store)
    [d] = backend.decide_batch([req(default=5.0)])
    assert d.fallback and d.value == 5.0 and d.attempts == 3 and "unparseable" in d.reason
    [call] = backend.drain_calls()
    assert call["fallback"] and call["answer"] == "banana"


class Slow(BaseChatModel):
    """Answers after `delay` seconds (a hung server when delay > timeout)."""

    delay: float = 1.0
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "slow"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.calls += 1
        time.sleep(self.delay)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="4"))])


class Flaky(BaseChatModel):
    """Fails with ConnectionError for prompts mentioning one of `down`, or for every call after `ok_calls`."""

    down: list[str] = []
    ok_calls: int = 10**9
    calls: int = 0
    lock: Any = None

    @property
    def _llm_type(self) -> str:
        return "flaky"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        text = " ".join(str(m.content) for m in messages)
        self.calls += 1
        if self.calls > self.ok_calls or any(d in text for d in self.down):
            raise ConnectionError("connection refused")
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="3"))])


def test_timeouts_are_retried_and_then_reported_unreachable():
    """A call slower than the timeout is retried with backoff; a batch that only times out is 'unreachable'."""
    chat = Slow(delay=0.5)
    with pytest.raises(BackendUnavailable, match="unreachable"):
        engine(chat, timeout_s=0.05, max_retries=1).answer([req()], [[{"role": "user", "content": "q"}]])
    assert chat.calls == 2


def test_one_failing_agent_degrades_only_itself():
    """When only one agent's calls fail, that agent falls back and the others are answered."""
    chat = Flaky(down=["fisher 2"])
    reqs = [req(agent=i, question=f"fisher {i}: how many?") for i in (1, 2, 3)]
    msgs = [[{"role": "user", "content": r.question}] for r in reqs]
    answers = engine(chat, max_retries=1).answer(reqs, msgs)
    assert [a.error is None for a in answers] == [True, False, True]
    assert "ConnectionError" in answers[1].error and answers[0].value == 3.0


def _llm_backends(spec, store, chat, **kw):
    cls = get_scenario(spec.scenario)
    llm = CachedBackend(LLMBackend("fake-" + type(chat).__name__, {"t": 0}, llm=engine(chat, **kw)), store)
    return {"scripted": ScriptedBackend(cls.strategies), "llm": llm}


def test_unreachable_backend_fails_the_run_and_keeps_committed_ticks(store):
    """Every call failing stops the run as failed with the reason; ticks committed before stay stored."""
    spec = build_spec("commons", policy="llm", ticks=5, seed=1)
    chat = Flaky(ok_calls=10)  # 5 fishers: ticks 1 and 2 succeed, tick 3 finds the server gone
    with pytest.raises(RunFailed) as info:
        execute(spec, store, backends=_llm_backends(spec, store, chat, max_retries=1))
    run = store.get_run(info.value.run_id)
    assert run.status == "failed" and "unreachable" in run.reason
    assert [t.tick for t in store.ticks(run.id)] == [1, 2] and run.ticks == 2


class Counting:
    """An engine that answers numbers from the request seed and counts its batches."""

    model_id = "counting"
    sampling: dict = {}

    def __init__(self):
        self.batches = []

    def answer(self, requests, messages):
        self.batches.append(len(requests))
        return [Answer(r.seed % 5, raw=str(r.seed % 5), tokens_in=10, tokens_out=1) for r in requests]


def test_rerun_is_served_from_cache_and_identical(store):
    """The second run of a spec makes no engine call and stores identical agent steps."""
    spec = build_spec("commons", policy="llm", ticks=4, seed=3)
    cls = get_scenario("commons")

    def backends(eng):
        return {"scripted": ScriptedBackend(cls.strategies), "llm": CachedBackend(LLMBackend("counting", {}, llm=eng), store)}

    first, second = Counting(), Counting()
    a = execute(spec, store, backends=backends(first))
    b = execute(spec, store, backends=backends(second))
    assert first.batches == [5, 5, 5, 5] and second.batches == []
    steps = lambda rid: [(s.tick, s.agent_id, s.action, s.payoff) for s in store.steps(rid)]  # noqa: E731
    assert steps(a.run_id) == steps(b.run_id) and a.metrics == b.metrics
    calls = store.llm_calls(b.run_id)
    assert len(calls) == 20 and all(c.cache_hit for c in calls)
    assert not any(c.cache_hit for c in store.llm_calls(a.run_id))


def test_cache_only_backend_refuses_misses(store):
    """Replay mode never calls a model: a miss is an error naming the agent and tick."""
    from agents.llm.cache import CacheMiss

    backend = CachedBackend(LLMBackend("counting", {}, llm_factory=lambda: pytest.fail("model loaded")), store, ReplayMode())
    with pytest.raises(CacheMiss, match="agent 1 at tick 1"):
        backend.decide_batch([req()])


def test_cache_key_covers_model_prompt_space_sampling_seed():
    """Changing any part of the key changes the key; equal parts give equal keys."""
    msgs = [{"role": "user", "content": "q"}]
    base = cache_key("m", msgs, NUM, {"t": 0.7}, 1)
    assert base == cache_key("m", [dict(msgs[0])], Number(0, 20, 1), {"t": 0.7}, 1)
    variants = [cache_key("m2", msgs, NUM, {"t": 0.7}, 1), cache_key("m", [{"role": "user", "content": "q2"}], NUM, {"t": 0.7}, 1),
                cache_key("m", msgs, Number(0, 21, 1), {"t": 0.7}, 1), cache_key("m", msgs, NUM, {"t": 0.8}, 1),
                cache_key("m", msgs, NUM, {"t": 0.7}, 2)]
    assert base not in variants and len(set(variants)) == 5


def test_mixed_population_routes_each_agent_to_its_backend(store):
    """4 LLM fishers and 1 scripted greedy outsider: only the 4 reach the LLM, the outsider acts greedily."""
    spec = build_spec("commons", policy="llm", ticks=1, seed=0,
                      sets=["population=[{count: 4, policy: llm}, {count: 1, policy: scripted, strategy: greedy}]"])
    cls = get_scenario("commons")
    eng = Counting()
    r = execute(spec, store, backends={"scripted": ScriptedBackend(cls.strategies), "llm": CachedBackend(LLMBackend("c", {}, llm=eng), store)})
    assert eng.batches == [4]
    steps = store.steps(r.run_id)
    assert [s.backend for s in steps] == ["llm"] * 4 + ["scripted"]
    assert steps[-1].action["harvest"] == 20.0


def test_concurrency_limit_is_respected():
    """No more than max_concurrency calls run at once."""
    active, peak, lock = [0], [0], threading.Lock()

    class Probe(Slow):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.05)
            with lock:
                active[0] -= 1
            return ChatResult(generations=[ChatGeneration(message=AIMessage(content="1"))])

    reqs = [req(agent=i) for i in range(12)]
    answers = ChatLLM(Probe(), "probe-limit", max_concurrency=3).answer(reqs, [[{"role": "user", "content": "q"}]] * 12)
    assert all(a.value == 1.0 for a in answers) and peak[0] <= 3


def _prompts_of(store, run_id, tick):
    return {c.agent_id: c.prompt for c in store.llm_calls(run_id) if c.tick == tick}


@pytest.mark.parametrize("feedback,dense", [("sparse", False), ("dense", True)])
def test_feedback_mode_decides_what_the_prompt_shows(store, feedback, dense):
    """Sparse feedback shows the agent its reward only; dense adds the group's metrics."""
    spec = build_spec("commons", policy="llm", ticks=2, seed=1, sets=[f"feedback={feedback}"])
    cls = get_scenario("commons")
    r = execute(spec, store, backends={"scripted": ScriptedBackend(cls.strategies),
                                       "llm": CachedBackend(LLMBackend("counting", {}, llm=Counting()), store)})
    prompt = _prompts_of(store, r.run_id, 2)[1]
    assert "Last round: reward" in prompt
    assert ("equality" in prompt) is dense and ("stock" in prompt.split("Last round:")[1]) is dense


def test_persona_and_memory_reach_the_prompt_and_the_store(store):
    """A group's persona is in its members' prompts; each tick stores what every agent remembered."""
    spec = build_spec("commons", policy="llm", ticks=2, seed=1,
                      sets=["population=[{count: 2, persona: a cautious elder}, {count: 3}]"])
    cls = get_scenario("commons")
    r = execute(spec, store, backends={"scripted": ScriptedBackend(cls.strategies),
                                       "llm": CachedBackend(LLMBackend("counting", {}, llm=Counting()), store)})
    prompts = _prompts_of(store, r.run_id, 2)
    assert "a cautious elder" in prompts[1] and "a cautious elder" not in prompts[3]
    assert "month 1: I caught" in prompts[1]
    snap = {s.agent_id: s.memory for s in store.steps(r.run_id) if s.tick == 1}
    assert snap[1]["items"][0]["text"].startswith("I caught")


def test_the_built_in_prompt_follows_the_runs_contract(store):
    """From contract 4 the built-in prompt asks for a number in one sentence; a run made under contract 3
    renders (and so finds its cache keys) with the two sentences it was made with, whether its backend
    comes from the factory or is built by hand and bound to the run."""
    from agents.llm.factory import make_llm_backend

    new = build_spec("commons", sets=["fishers=2"], policy="llm")
    old = new.model_copy(update={"contract": 3})
    r = req(space=Number(0, 68, 1))
    ends = {}
    for spec in (new, old):
        made = make_llm_backend(spec, store)
        by_hand = CachedBackend(LLMBackend("m", {}, llm=object()), store)
        by_hand.bind("run", spec)
        texts = {b.backend.render([r])[0][-1]["content"] for b in (made, by_hand)}
        assert len(texts) == 1
        ends[spec.contract] = texts.pop().splitlines()[-1]
    assert new.profile.compact_prompt and ends[new.contract] == "Answer with a number from 0 to 68 in steps of 1."
    assert ends[3] == "Answer with a number from 0 to 68 in steps of 1. Reply with the number only."


def test_answer_format_is_one_sentence_per_space():
    from agents.llm.prompts import answer_format

    assert answer_format(Number(0, 68, 1)) == "Answer with a number from 0 to 68 in steps of 1."
    assert answer_format(Number(0, 1, 0)) == "Answer with a number from 0 to 1."
    assert answer_format(Choice(["none", "fisher 3"])) == "Answer with one of: none, fisher 3. Reply with the option only."
    assert answer_format(Text(40)) == "Answer with a short message (at most 40 tokens)."
    form = answer_format(Form((("price", Number(1, 9, 1)),)))
    assert form.startswith("Answer with price: a number") and form.endswith("Reply with a JSON object with exactly these keys.")


def test_memory_header_is_the_templates_choice():
    """The contract-4 built-in template lists memory items without a header; contract 3's and a user's
    template (by default) keep "What you remember:"."""
    from agents.llm.prompts import DEFAULT, DEFAULT_CONTRACT3, PromptTemplate

    r = DecisionRequest(agent_id=1, tick=2, phase="harvest", space=NUM, default=0.0, backend="llm", context="A lake.",
                        question="How many?", memory="- month 1: I caught 3 tons.", own_context="You are fisher 1.")
    new, old = DEFAULT.render(r)[1]["content"], DEFAULT_CONTRACT3.render(r)[1]["content"]
    assert "You are fisher 1.\n- month 1: I caught 3 tons.\nHow many?" in new and "What you remember" not in new
    assert "You are fisher 1.\nWhat you remember:\n- month 1: I caught 3 tons.\nHow many?" in old
    mine = PromptTemplate(user="${memory}${question}")
    assert mine.render(r)[1]["content"] == "What you remember:\n- month 1: I caught 3 tons.\nHow many?"
    # a user's template with no `user` text of its own renders as it did before contract 4
    assert PromptTemplate(system="Be brief.").render(r)[1]["content"] == old
    assert PromptTemplate(user="${memory}${question}", memory_header="Notes:").render(r)[1]["content"].startswith("Notes:\n")
