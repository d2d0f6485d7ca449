"""Served models' output constraints and strict parsing, without a server (fast).

The grammar/schema/regex builders of agents/llm/structured.py, the output bound, the per-call
keyword arguments a chat class receives, and the strict parser with its retry-then-fallback path.
"""

import json
import random
import re

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from agents.llm.cache import CachedBackend

from agents.llm.backend import LLMBackend
from agents.llm.chat import ChatLLM
from agents.llm.parse import parse_strict
from agents.llm.structured import (call_kwargs, gbnf, int_range_gbnf, int_range_regex, json_schema, max_tokens_for,
                                   number_regex, resolve_mode, response_format, vllm_fields)
from sim.core.contracts import DecisionRequest
from sim.core.spaces import Choice, Form, Number, SpaceError, Text

NUM = Number(0, 20, 1)
FORM = Form({"give": Number(0, 10, 1), "to": Choice(["a", "b"]), "note": Text(4)})


def _gbnf_as_regex(expr: str) -> str:
    """The integer-range GBNF (quoted literals, classes, alternation, groups) read as a regex."""
    return re.sub(r'"([^"]*)"', lambda m: re.escape(m.group(1)), expr).replace(" ", "")


def _cases():
    rng = random.Random(7)
    fixed = [(0, 0), (0, 9), (0, 10), (0, 20), (3, 7), (1, 100), (0, 1000), (17, 4321), (999, 1000), (-5, 5), (-120, -3)]
    return fixed + [tuple(sorted(rng.sample(range(-3000, 10000), 2))) for _ in range(60)]


@pytest.mark.parametrize("lo,hi", _cases())
def test_integer_range_patterns_match_exactly_the_range(lo, hi):
    """The regex and the GBNF accept every integer in [lo, hi] and nothing else (no leading zeros)."""
    rx, gx = re.compile(int_range_regex(lo, hi)), re.compile(_gbnf_as_regex(int_range_gbnf(lo, hi)))
    window = range(min(lo, 0) - 25, max(hi, 0) + 25)
    for v in window:
        assert bool(rx.fullmatch(str(v))) == (lo <= v <= hi), (lo, hi, v)
        assert bool(gx.fullmatch(str(v))) == (lo <= v <= hi), (lo, hi, v)
    for v in (lo, hi):
        if v > 0:
            assert not rx.fullmatch("0" + str(v)) and not gx.fullmatch("0" + str(v))


def test_number_patterns_for_grids_and_continuous_ranges():
    """A short non-unit grid is its value list; a continuous range is its integers plus a few decimals."""
    grid = Number(0, 1, 0.25)
    assert vllm_fields(grid) == {"guided_choice": ["0", "0.25", "0.5", "0.75", "1"]}
    assert json_schema(grid)["properties"]["answer"]["enum"] == [0, 0.25, 0.5, 0.75, 1]
    cont = re.compile(number_regex(Number(-2.5, 3, 0)))
    assert cont.fullmatch("-2.5") and cont.fullmatch("3") and cont.fullmatch("0.125")
    assert not cont.fullmatch("4") and not cont.fullmatch("1.23456") and not cont.fullmatch("x")


def test_json_schemas_accept_valid_answers_and_refuse_invalid_ones():
    """The schemas sent as response_format / guided_json agree with the spaces' own validation."""
    jsonschema = pytest.importorskip("jsonschema")
    for space, good, bad in [
        (NUM, [{"answer": 0}, {"answer": 20}], [{"answer": 21}, {"answer": 2.5}, {"answer": "7"}, {"answer": 1, "x": 2}, {}]),
        (Choice(["up", "down"]), [{"answer": "up"}], [{"answer": "sideways"}]),
        (Text(2), [{"answer": "hi"}], [{"answer": ""}, {"answer": "x" * 100}]),
        (FORM, [{"give": 3, "to": "b", "note": "ok"}], [{"give": 3, "to": "c", "note": "ok"}, {"give": 3, "to": "a"}]),
    ]:
        schema = json_schema(space)
        for value in good:
            jsonschema.validate(value, schema)
            parse_strict(json.dumps(value), space)
        for value in bad:
            with pytest.raises(jsonschema.ValidationError):
                jsonschema.validate(value, schema)
    rf = response_format(NUM)
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] and rf["json_schema"]["schema"]["required"] == ["answer"]


def test_gbnf_grammars_per_space():
    """Choice: the option list; Number: the digit range; Text: one bounded line; Form: a JSON object."""
    assert gbnf(Choice(["cooperate", "defect"])) == 'root ::= ("cooperate" | "defect")\n'
    assert gbnf(NUM) == f"root ::= {int_range_gbnf(0, 20)}\n"
    assert "{0,23}" in gbnf(Text(4))  # 6 characters per token, the first one not blank
    form = gbnf(FORM)
    assert form.startswith('root ::= "{" ws "\\"give\\"" ws ":" ws ') and '("\\"a\\"" | "\\"b\\"")' in form
    # llama.cpp parses grammars only when it samples: tests/test_llm_served.py sends these to a real server


def test_max_tokens_bound_what_the_space_needs():
    """Every bound covers the longest valid answer (as characters) and is small: no 486-token numbers."""
    assert max_tokens_for(NUM, "llama_cpp") <= 10
    assert max_tokens_for(Number(0, 10_000, 1), "none") == 5 + 6
    assert max_tokens_for(NUM, "json_schema") >= len('{"answer": 20}')
    assert max_tokens_for(Choice(["none", "fisher 12"]), "vllm") >= len("fisher 12")
    assert 32 <= max_tokens_for(Text(32), "llama_cpp") <= 40
    assert max_tokens_for(FORM, "llama_cpp") >= len('{"give": 10, "to": "b", "note": "xxxx"}')


class Recorder(BaseChatModel):
    """An OpenAI-compatible chat class (it has `extra_body` and `max_tokens`) recording each call's kwargs."""

    extra_body: dict | None = None
    max_tokens: int | None = None
    answer: str = "7"
    calls: list = []

    @property
    def _llm_type(self) -> str:
        return "recorder"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.calls.append(kwargs)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.answer))])


def req(space=NUM, default=0.0, agent=1, seed=11):
    return DecisionRequest(agent_id=agent, tick=1, phase="harvest", space=space, default=default, backend="llm",
                           context="A lake.", question="How many?", seed=seed)


@pytest.mark.parametrize("mode,key", [("llama_cpp", "grammar"), ("vllm", "guided_regex"), ("json_schema", "response_format")])
def test_each_call_carries_its_spaces_constraint_and_bound(mode, key):
    """The engine sends every request its own constraint, seed and max_tokens; the user's extra_body is kept."""
    chat = Recorder(calls=[], extra_body={"top_k": 5}, answer='{"answer": 7}' if mode == "json_schema" else "7")
    eng = ChatLLM(chat, "rec", structured=mode, max_concurrency=2)
    answers = eng.answer([req(seed=11), req(Number(0, 500, 1), agent=2, seed=12)], [[{"role": "user", "content": "q"}]] * 2)
    assert [a.value for a in answers] == [7.0, 7.0] and all(a.error is None for a in answers)
    calls = sorted(chat.calls, key=lambda kw: kw["seed"])
    assert [kw["seed"] for kw in calls] == [11, 12]
    assert [kw["max_tokens"] for kw in calls] == [max_tokens_for(NUM, mode), max_tokens_for(Number(0, 500, 1), mode)]
    assert all(kw["extra_body"]["top_k"] == 5 and key in kw["extra_body"] for kw in calls)
    if mode == "llama_cpp":
        assert calls[1]["extra_body"]["grammar"] == gbnf(Number(0, 500, 1))
        assert calls[1]["extra_body"]["max_tokens"] == calls[1]["max_tokens"]  # llama.cpp reads the legacy name


def test_auto_mode_and_classes_without_a_body():
    """auto: json_schema for OpenAI-compatible classes, none for the rest; a plain class gets no extra kwargs."""
    assert resolve_mode("auto", Recorder(calls=[])) == "json_schema"
    plain = FakeListChatModel(responses=["7"])
    assert resolve_mode("auto", plain) == "none" and resolve_mode("llama_cpp", plain) == "llama_cpp"
    assert call_kwargs(NUM, "llama_cpp", plain, seed=3) == {}
    assert call_kwargs(NUM, "none", Recorder(calls=[], max_tokens=4)) == {"max_tokens": 4, "extra_body": {"max_tokens": 4}}
    with pytest.raises(ValueError):
        resolve_mode("xml", plain)


@pytest.mark.parametrize("text,value", [("7", 7.0), (" 7. ", 7.0), ("**7**", 7.0), ('{"answer": 7}', 7.0),
                                        ('```json\n{"answer": 7}\n```', 7.0), ("I think so.\nANSWER: 7", 7.0),
                                        ("Final answer: 7", 7.0)])
def test_strict_parser_accepts_the_value_or_a_marked_value(text, value):
    assert parse_strict(text, NUM) == value


@pytest.mark.parametrize("text", ["I will catch 7 tons.", "You are one of 3 fishers in this lake.", "7 tons", "21", "",
                                  "ANSWER: 3\nANSWER: 4", '{"a": 1, "b": 2}', "seven"])
def test_strict_parser_refuses_numbers_fished_out_of_a_ramble(text):
    with pytest.raises(SpaceError):
        parse_strict(text, NUM)


def test_strict_parser_choices_forms_and_text():
    c = Choice(["cooperate", "defect"])
    assert parse_strict("Defect.", c) == "defect" and parse_strict('"cooperate"', c) == "cooperate"
    for text in ["I choose to cooperate.", "cooperate or defect"]:
        with pytest.raises(SpaceError):
            parse_strict(text, c)
    assert parse_strict('{"give": 2, "to": "a", "note": "hi"}', FORM) == {"give": 2.0, "to": "a", "note": "hi"}
    with pytest.raises(SpaceError):
        parse_strict('Here it is: {"give": 2, "to": "a", "note": "hi"}', FORM)
    assert parse_strict("Let us fish less.", Text(8)) == "Let us fish less."
    with pytest.raises(SpaceError):
        parse_strict("word " * 100, Text(8))


def test_a_ramble_is_retried_then_falls_back_visibly(store):
    """Without a constraint a ramble with a number in it is no decision: re-asked, then the default, recorded."""
    chat = FakeListChatModel(responses=["You are one of 3 fishers, so I catch 7."])
    backend = CachedBackend(LLMBackend("fake", {}, llm=ChatLLM(chat, "fake", max_retries=1, backoff_s=0.01)), store)
    [d] = backend.decide_batch([req(default=5.0)])
    assert d.fallback and d.value == 5.0 and d.attempts == 2 and "unparseable" in d.reason
    chat2 = FakeListChatModel(responses=["Let me think.", "ANSWER: 9"])
    [d2] = CachedBackend(LLMBackend("fake2", {}, llm=ChatLLM(chat2, "fake2", max_concurrency=1, backoff_s=0.01)), store).decide_batch([req(default=5.0)])
    assert not d2.fallback and d2.value == 9.0 and d2.attempts == 2
