"""Reasoning before the answer (a paper protocol's step-by-step prompt): the prompt, the cache key, the
parse of a served model's text, the local engine's two stages, and the scenarios' protocol switches."""

from __future__ import annotations

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from agents.llm.chat import ChatLLM
from agents.llm.keys import cache_key
from agents.llm.parse import cut_reasoning, reasoned_answer
from agents.llm.prompts import render_messages
from sim.core.contracts import DecisionRequest
from sim.core.spaces import Choice, Number, SpaceError, Text
from tests.conftest import scripted_model

NUM = Number(0, 20, 1)


def req(reason: int = 0, space=NUM, seed: int = 1, default=0.0) -> DecisionRequest:
    return DecisionRequest(agent_id=1, tick=1, phase="harvest", space=space, default=default, backend="llm",
                           context="A lake.", question="How many?", seed=seed, reason_tokens=reason)


def test_a_reasoning_request_asks_for_reasoning_then_an_answer_line():
    plain, reasoned = render_messages(req()), render_messages(req(64))
    assert plain == render_messages(DecisionRequest(agent_id=1, tick=1, phase="harvest", space=NUM, default=0.0,
                                                    backend="llm", context="A lake.", question="How many?", seed=1))
    assert "step by step" not in plain[-1]["content"]
    assert 'put your final answer after "Answer:"' in reasoned[-1]["content"]
    assert "a number from 0 to 20 in steps of 1" in reasoned[-1]["content"]
    assert render_messages(req(64, space=Text(10), default="x")) == render_messages(req(0, space=Text(10), default="x"))


def test_a_request_may_word_its_own_system_message_and_answer_instructions():
    """A paper protocol's own system text replaces the template's (a user's too: it holds the paper's rules), and its
    answer instructions replace the platform's reasoning sentence, or its answer sentence; empty, nothing changes."""
    from dataclasses import replace

    from agents.llm.prompts import PromptTemplate

    paper = "Let's think step-by-step. Put the final answer after \"Answer:\", example Answer: N tons."
    for reason, space, default in ((64, NUM, 0.0), (0, NUM, 0.0), (0, Text(10), "x")):
        plain = req(reason, space=space, default=default)
        own = replace(plain, system="You are John, a fisherman.", answer_prompt=paper)
        base, got = render_messages(plain), render_messages(own)
        assert got[0] == {"role": "system", "content": "You are John, a fisherman."} != base[0]
        assert got[1]["content"].endswith("How many?\n" + paper)
        assert "Think it through" not in got[1]["content"] and "Answer with" not in got[1]["content"]
        assert got[1]["content"].split("\n")[:-1] == base[1]["content"].split("\n")[:-1]  # all but the last line kept
        terse = PromptTemplate(system="Answer in as few words as possible.")
        assert render_messages(own, terse)[0]["content"] == "You are John, a fisherman."
        assert render_messages(replace(own, system=None, answer_prompt=""), terse) == render_messages(plain, terse)
        assert render_messages(replace(own, system=""))[0]["role"] == "user"  # "": one user turn, no system message


def test_the_reasoning_budget_enters_the_cache_key_only_when_there_is_one():
    msgs = render_messages(req())
    old = cache_key("m", msgs, NUM, {"t": 1}, 1)
    assert cache_key("m", msgs, NUM, {"t": 1}, 1, 0) == old  # every stored run keeps its keys
    assert cache_key("m", msgs, NUM, {"t": 1}, 1, 64) not in (old, cache_key("m", msgs, NUM, {"t": 1}, 1, 128))


@pytest.mark.parametrize("text, value", [
    ("The lake has 100 tons, so 5 each is safe.\nAnswer: 5 tons", 5.0),
    ("Answer: 3\nOn reflection, less.\nAnswer: **2**", 2.0),
    ("I keep it sustainable. Answer: 7.", 7.0),
])
def test_a_reasoned_answer_is_read_after_the_last_answer_line(text, value):
    assert reasoned_answer(text, NUM) == value


@pytest.mark.parametrize("text", ["I would catch 5 tons.", "Answer: plenty", "Answer: 50 tons"])
def test_a_reasoned_answer_without_a_valid_answer_line_is_refused(text):
    with pytest.raises(SpaceError):
        reasoned_answer(text, NUM)


def test_local_reasoning_is_cut_before_the_models_own_answer():
    assert cut_reasoning("Half is fair. Answer: 9 tons") == "Half is fair."
    assert cut_reasoning("No cue here.") == "No cue here."


def test_a_served_model_reasons_then_answers_and_a_rambling_answer_is_retried():
    chat = FakeListChatModel(responses=["The stock is high, so 12 is safe.\nAnswer: 12 tons"])
    [a] = ChatLLM(chat, "fake", backoff_s=0.01).answer([req(64)], [render_messages(req(64))])
    assert a.value == 12.0 and a.attempts == 1 and "stock is high" in a.raw
    chat = FakeListChatModel(responses=["I would take about 12.", "12"])  # no Answer line: retried, bare answer accepted
    [a] = ChatLLM(chat, "fake", backoff_s=0.01, max_concurrency=1).answer([req(64)], [render_messages(req(64))])
    assert a.value == 12.0 and a.attempts == 2


@pytest.fixture(scope="module")
def lm():
    from tests.tiny_lm import tiny_lm

    return tiny_lm()


def test_the_local_engine_reasons_then_decodes_the_answer_under_its_constraint(lm):
    from agents.llm.local.llm import LocalLLM

    eng = LocalLLM(lm=lm, temperature=0.8)
    reqs = [req(12, seed=s) for s in range(6)] + [req(12, space=Choice(["stay", "leave"]), default="stay", seed=9), req(0, seed=3)]
    msgs = [render_messages(r) for r in reqs]
    got = eng.answer(reqs, msgs)
    for r, a in zip(reqs, got):
        assert a.error is None
        r.space.validate(a.value)
    for r, a in zip(reqs[:7], got[:7]):
        reasoning, cue, answer = a.raw.rpartition("\nAnswer: ")
        assert cue and reasoning.strip()  # some reasoning, then the answer
        assert answer == (a.value if isinstance(a.value, str) else f"{a.value:g}")  # the answer line is the value decided
        assert a.tokens_out > len(lm.encode([answer])[0])  # the reasoning's tokens are counted
    assert "\nAnswer: " not in got[7].raw  # a request without reasoning answers bare
    one_by_one = [eng.answer([r], [m])[0] for r, m in zip(reqs, msgs)]
    assert [(a.value, a.raw) for a in one_by_one] == [(a.value, a.raw) for a in got]  # a batch changes no answer
    plain = eng.answer([req(0, seed=s) for s in range(6)], [render_messages(req(0, seed=s)) for s in range(6)])
    assert sum(p.tokens_out for p in plain) < sum(a.tokens_out for a in got[:6])  # the bare answers read no reasoning


def _model(scenario: str, config_file: str, **sets):
    return scripted_model(scenario, config_file=config_file, sets=[f"{k}={v}" for k, v in sets.items()])


def test_govsim_protocol_hides_threshold_and_horizon_and_reasons_each_catch():
    model = _model("commons", "scenarios/commons/configs/govsim.yaml")
    model.steps += 1  # month 1's view
    fisher = list(model.agents)[0]
    r = model.observe(fisher, "harvest")
    assert r.reason_tokens == 128
    user = render_messages(r)[-1]["content"]  # (GovSim's words, tests/test_protocols.py: its date, not a month number)
    assert "collapse" not in user and "of 12" not in user and "12 months" not in user and "Date: 2024-01-01" in user
    default = _model("commons", "scenarios/commons/configs/llm.yaml")
    default.steps += 1
    d = default.observe(list(default.agents)[0], "harvest")
    assert d.reason_tokens == 0 and "collapses" in d.context and "month 1 of 12" in d.context


def test_vh2024_protocol_gives_the_goal_and_no_direct_reciprocity_cue():
    """The goal is in the paper's system prompt of every request (issue 36: the prompts are the paper's), and a
    recipient keeps no memory of who gave to it (the paper's players have no memory at all)."""
    model = _model("donor", "scenarios/donor/configs/vh2024.yaml", agents=4, rounds=2, generations=1)
    assert model.config.trace_depth == 3 and model.reward_layer.feedback == "none"
    from agents.llm.prompts import render_messages
    from sim.core.contracts import Decision

    model.step()  # round 1 (strategies written by the default, gifts at the default 0: answer them here)
    donor_id, recipient = next(iter(model.pairs.items()))
    system = render_messages(model.observe(model.agent_map()[donor_id], "donate"))[0]["content"]
    assert "Your goal is to maximize the number of units you have after the final round." in system
    model.modes[donor_id] = "give"
    model.act("donate", [Decision(donor_id, "donate", 5.0, "llm")])
    assert recipient.resources > model.config.endowment  # the gift arrived (5 units, doubled)
    assert not any("gave me" in line for line in recipient.memory.render("x").splitlines())
    assert not recipient.memory.items and not model.agent_map()[donor_id].memory.items
    assert model.reward_layer.feedback_for(recipient.unique_id, {recipient.unique_id: 3.0}, {}) == {}


@pytest.mark.slow
@pytest.mark.parametrize("scenario, config, sets, reasoned_phase", [
    ("commons", "scenarios/commons/configs/govsim.yaml", ["months=2", "fishers=3", "reasoning=24"], "harvest"),
    ("donor", "scenarios/donor/configs/vh2024.yaml", ["agents=4", "rounds=2", "generations=1", "reasoning=24",
                                                      "strategy_tokens=24"], "donate"),
    ("market", "scenarios/market/configs/magentic.yaml", ["customers_n=2", "businesses_n=4", "max_steps=3"], None),
])
def test_a_paper_protocol_runs_on_the_embedded_model_and_reruns_from_its_cache(db_url, scenario, config, sets, reasoned_phase):
    from sqlalchemy import text

    from sim.store.store import Store
    from tests.conftest import cli_json

    args = ["run", scenario, "--config", config, *[x for s in sets for x in ("--set", s)]]
    first, second = cli_json(*args, db=db_url), cli_json(*args, db=db_url)
    assert first["fallbacks"] == 0 and second["fallbacks"] == 0  # every decision valid, none replaced
    assert first["metrics"] == second["metrics"] and first["ticks"] == second["ticks"]
    with Store(db_url).engine.connect() as conn:
        rows = conn.execute(text("select run_id, phase, answer, cache_hit, fallback from llm_calls")).all()
    by_run = {run: [r for r in rows if r.run_id == run] for run in (first["run_id"], second["run_id"])}
    assert len(by_run[first["run_id"]]) == len(by_run[second["run_id"]]) > 0
    assert all(r.cache_hit for r in by_run[second["run_id"]]) and not any(r.cache_hit for r in by_run[first["run_id"]])
    if reasoned_phase:
        reasoned = [r for r in by_run[first["run_id"]] if r.phase == reasoned_phase]
        assert reasoned and all("\nAnswer: " in r.answer for r in reasoned)  # reasoning, then the constrained answer


def test_the_post_harvest_conversation_reports_every_catch_and_agrees_next_months_limit():
    """GovSim's month (scripted fishers): harvest, the mayor's report, rounds of messages each seeing the
    last, the median stated limit the agreed limit of the next month."""
    model = scripted_model("commons", sets=["conversation_rounds=2", "months=3", "fishers=4"], policy="scripted")
    assert model.phases() == ("harvest", "converse1", "converse2")
    model.step()
    assert model.norm is None  # month 1 fishes before anyone has talked
    # sustainable fishers caught 12 each (100 / 2 / 4) and state the share of next month's regrown lake: 12
    assert model.agreed == 12.0
    model.step()
    assert model.norm == 12.0 and all(f.catch <= 12.0 for f in model.agents)


def test_reflection_puts_an_insight_in_each_llm_fishers_memory():
    """The compact protocol's reflection (GovSim's own: tests/test_protocols.py)."""
    model = _model("commons", "scenarios/commons/configs/govsim.yaml", fishers=3, months=2, protocol="compact")
    assert model.phases()[-3:] == ("converse1", "converse2", "reflect")
    model.step()
    for fisher in model.agents:
        text = fisher.memory.render("How many tons of fish do you catch this month?")
        assert "My insight:" in text
    report = model.history.render("x")
    assert "The mayor's report of this month's catches: fisher" in report and "At the restaurant the fishers said:" in report


def test_a_reasoned_answer_after_a_failed_call_is_still_read_after_its_answer_line():
    """A connection error counts an attempt but asks for nothing: the next reply is still a reasoned one."""
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    class Flaky(FakeListChatModel):
        failed: bool = False

        def _call(self, *args, **kwargs):
            if not self.failed:
                object.__setattr__(self, "failed", True)
                raise ConnectionError("server restarting")
            return super()._call(*args, **kwargs)

    chat = Flaky(responses=["Stock is high.\nAnswer: 12 tons"])
    [a] = ChatLLM(chat, "fake", backoff_s=0.0, max_concurrency=1).answer([req(64)], [render_messages(req(64))])
    assert a.value == 12.0 and a.attempts == 2 and a.error is None


def test_the_reasoning_budget_reaches_the_request_body_and_keeps_the_users_cap():
    from langchain_openai import ChatOpenAI

    chat = ChatOpenAI(model="m", api_key="x", base_url="http://127.0.0.1:9")
    bare = ChatLLM(chat, "m", structured="none")._kwargs(req(0))
    kw = ChatLLM(chat, "m", structured="none")._kwargs(req(128))
    assert kw["max_tokens"] == bare["max_tokens"] + 128
    if "max_tokens" in (kw.get("extra_body") or {}):  # llama.cpp reads the body's max_tokens only
        assert kw["extra_body"]["max_tokens"] == kw["max_tokens"]
    capped = ChatOpenAI(model="m", api_key="x", base_url="http://127.0.0.1:9", max_tokens=50)
    assert ChatLLM(capped, "m", structured="none")._kwargs(req(128))["max_tokens"] == 50


@pytest.mark.parametrize("text, value", [("I answer: 5 ... Answer: 7 tons of fish", 7.0), ("Answer: $12", 12.0),
                                         ("Answer = 1,000", 1000.0)])
def test_the_last_answer_cue_wins_even_on_one_line(text, value):
    assert reasoned_answer(text, Number(0, 2000, 1)) == value


# ----- a paper's own words in place of the platform's (issue 36): `system` and `answer_prompt` of a request -----------
def test_a_request_may_send_its_own_system_message_or_none():
    """None keeps the template's system message; a text replaces it; "" sends the user turn alone (GovSim)."""
    from dataclasses import replace

    from agents.llm.prompts import DEFAULT

    base = req()
    assert render_messages(base)[0] == {"role": "system", "content": DEFAULT.system}
    own = render_messages(replace(base, system="You are a donor in a game."))
    assert own[0] == {"role": "system", "content": "You are a donor in a game."} and own[1] == render_messages(base)[1]
    alone = render_messages(replace(base, system=""))
    assert alone == [render_messages(base)[1]]


def test_a_request_may_say_how_to_answer_in_its_own_words():
    """`answer_prompt` replaces the platform's answer sentence, with reasoning or without; one that reasons must still ask
    for its answer after "Answer:" (the engines read it there)."""
    from dataclasses import replace

    govsim = 'Let\'s think step-by-step. Put the final answer after "Answer:", example Answer: N tons.'
    reasoned = render_messages(replace(req(64), answer_prompt=govsim))[-1]["content"]
    assert reasoned.endswith("How many?\n" + govsim) and "Think it through" not in reasoned
    plain = render_messages(replace(req(), answer_prompt="Reply in tons."))[-1]["content"]
    assert plain.endswith("How many?\nReply in tons.") and "Answer with" not in plain
    with pytest.raises(ValueError, match="Answer:"):
        render_messages(replace(req(64), answer_prompt="Think, then reply."))


def test_only_an_llm_agent_s_request_carries_a_protocol_s_own_words():
    """A scripted strategy reads no prompt: its request keeps the defaults (and the run's keys their text)."""
    model = _model("commons", "scenarios/commons/configs/govsim.yaml", fishers=3, months=1)
    model.steps += 1
    fisher = list(model.agents)[0]
    llm = model.observe(fisher, "harvest")
    assert llm.system == "" and "step-by-step" in llm.answer_prompt
    fisher.policy = "scripted"
    scripted = model.observe(fisher, "harvest")
    assert scripted.system is None and scripted.answer_prompt == "" and scripted.own_context == ""
