"""docs/protocols.md: our prompts are rendered from the code, and each departure it lists is checked here against
the code, so a change to a prompt or a default that the page describes fails until the page says it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from scenarios import REGISTRY
from scenarios.donor.config import DonorConfig
from scenarios.donor.prompts import MAX_SURVIVOR_STRATEGIES, STRATEGY_CHARS
from scenarios.market import templates as market_tpl
from tests.recorder import Recorder, each

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "protocols.md").read_text()
sys.path.insert(0, str(ROOT / "docs"))
import _gen  # noqa: E402


def _user(name: str) -> str:
    _, messages = _gen.prompt_of(name)
    return next(m["content"] for m in messages if m["role"] == "user")


@pytest.mark.parametrize("name", sorted(n for n, cls in REGISTRY.items() if cls.probes))
def test_every_scenario_s_prompt_is_rendered_on_the_page(name):
    """Every scenario with a validity probe (the representative LLM decision); the grid games' is their `--policy llm`
    step, and their synthesis protocol is described on the page and in docs/scenarios/gathering.md."""
    assert f"<!-- gen: prompt {name} -->" in PAGE
    text = _gen.render(f"<!-- gen: prompt {name} -->", "protocols.md")
    assert "**user**" in text and _user(name) in text


def test_the_grid_games_protocol_is_on_the_page():
    assert "## Gathering and Cleanup" in PAGE and "scenarios/gathering.md" in PAGE


def test_the_fishery_departures_hold():
    user = _user("commons")
    assert "If fewer than 5 tons remain" in user and "month 1 of 12" in user  # told: threshold and horizon
    assert "Answer with a number from 0 to 100" in user  # a constrained number, no reasoning asked for
    assert "step-by-step" not in user.lower() and "Answer:" not in user
    assert REGISTRY["commons"].Config().talk is False  # the default is GovSim's no-language ablation
    assert "fisher 1" in user


def test_the_donor_departures_hold():
    user = _user("donor")
    assert DonorConfig().trace_depth == 2 and "maximize" not in user  # depth 2, no goal line
    assert (MAX_SURVIVOR_STRATEGIES, STRATEGY_CHARS) == (6, 200)
    assert "What percent of your resources" in user


def test_the_market_departures_hold():
    user = _user("market")
    assert "(worth $" in user and "Required amenities" in user  # item values and amenities are told
    assert "(missing:" in market_tpl.PROPOSAL.template or "$missing" in market_tpl.PROPOSAL.template


@pytest.mark.parametrize("marker", ["commons@govsim", "donor@vh2024", "market@magentic"])
def test_each_paper_protocol_s_prompt_is_rendered_on_the_page(marker):
    assert f"<!-- gen: prompt {marker} -->" in PAGE
    assert _user(marker) in _gen.render(f"<!-- gen: prompt {marker} -->", "protocols.md")


def test_the_paper_protocols_close_what_the_page_says_they_close():
    govsim = _user("commons@govsim")
    assert "collapses" not in govsim and "of 12" not in govsim and 'final answer after "Answer:"' in govsim
    request, _ = _gen.prompt_of("commons@govsim")
    assert request.reason_tokens == 128
    # vh2024: the goal is in the paper's system prompt, and the trace in its sentences (issue 36)
    request, messages = _gen.prompt_of("donor@vh2024")
    assert "Your goal is to maximize the number of units you have after the final round." in messages[0]["content"]
    vh = _user("donor@vh2024")
    assert vh.count(" donated ") + vh.count("did not have any previous interactions") >= 2  # the trace reaches past the recipient
    assert request.reason_tokens == 128


def test_the_market_paper_protocol_shows_the_request_alone_and_no_offer_notes():
    user = _user("market@magentic")
    # the request inside Magentic's own assistant text (customer_view: magentic, issue 36)
    assert "worth $" not in user and "twice the value" not in user and "They have the following request: " in user
    assert "(missing:" not in user


# ----- GovSim (`commons`, configs/govsim.yaml) word for word (issue 36) --------------------------------------------------
# Each quote is an exact substring of GovSim's file at this commit (b0b33e50, which the page cited before, has the same
# texts); the phase is where our rendered prompts must hold it ("harvest@2": month 2's harvest, after an agreement).
GOVSIM = "giorgiopiatti/GovSim@1d11adf047b24fa2ba0d44a1d4931015ea2e5210"
_COG = "simulation/scenarios/fishing/agents/persona_v3/cognition/"
_ENV = "simulation/scenarios/fishing/environment/env.py"
GOVSIM_QUOTES = [  # (phase, quote, path, line)
    ("harvest", "a fisherman, and you fish every month in a lake along with four other fishermen (", _COG + "utils.py", 155),
    ("harvest", " The lake has a carrying capacity of 100 tons of fish.", _COG + "utils.py", 156),
    ("harvest", " For every ton of fish caught, a fisherman earns one thousand dollars.", _COG + "utils.py", 159),
    ("harvest", " Each fisherman's goal is to optimize his income in the long run over many months.", _COG + "utils.py", 160),
    ("harvest", " At the end of each month, the number of fish caught by each fisherman will be revealed, and the fishermen "
                "will have the opportunity to communicate with each other.", _COG + "utils.py", 161),
    ("harvest", " They can use this as an opportunity to negotiate and persuade others to influence their behavior in the "
                "next month.", _COG + "utils.py", 162),
    ("harvest", " For example, if there are 90 tons of fish at the beginning of the month and the five fishermen catch a "
                "total of 30 fish,", _COG + "utils.py", 163),
    ("harvest", " there will be 60 tons of fish left at the end of the month before reproduction, and 100 tons after "
                "reproduction.", _COG + "utils.py", 164),
    ("harvest", "(format: YYYY-MM-DD: memory):", _COG + "utils.py", 61),
    ("harvest", "Before everyone fishes, there are ", _ENV, 7),
    ("harvest", "Task: With a fishing range set between ", _COG + "act_prompts.py", 36),
    ("harvest", "how many tons of fish would you catch this month?", _COG + "act_prompts.py", 36),
    ("harvest", "Let's think step-by-step.", _COG + "utils.py", 85),
    ("harvest", ' Put the final answer after "Answer:", example Answer: N tons.', _COG + "act_prompts.py", 38),
    ("converse1", " tons of fish, and caught ", _ENV, 12),
    ("converse1", "engaged in a group chat.", _COG + "converse_prompts.py", 46),
    ("converse1", "Conversation so far:", _COG + "converse_prompts.py", 48),
    ("converse1", "Ladies and gentlemen, let me give you the monthly fishing report. ", _COG + "converse.py", 71),
    ("converse1", "Task: What would you say next in the group chat? ", _COG + "converse_prompts.py", 52),
    ("converse1", "Ensure the conversation flows naturally and avoids repetition.", _COG + "converse_prompts.py", 53),
    ("agree", "In the following conversation, the participants discuss their fishing", _COG + "reflect_prompts.py", 130),
    ("agree", " activities and activities and the weight of fish they caught. Determine", _COG + "reflect_prompts.py", 131),
    ("agree", "Please provide the specific fishing limit per person as agreed upon in the conversation, if no limit was "
              "agreed upon, please answer N/A.", _COG + "reflect_prompts.py", 138),
    ("agree", ' Put the final answer after "Answer:".', _COG + "reflect_prompts.py", 140),
    ("plan", " you need to remember for your planning, from your own", _COG + "reflect_prompts.py", 81),
    ("memorize", " you might have found interesting from your own", _COG + "reflect_prompts.py", 107),
    ("reflect", "What high-level insights can you infere from the above", _COG + "reflect_prompts.py", 27),
    ("reflect", " statements? (example format: insight (because of 1,5,3)", _COG + "reflect_prompts.py", 28),
    ("harvest@2", "The community agreed on a maximum limit of", _COG + "converse.py", 140),
    ("harvest@2", " tons of fish per person.", _COG + "converse.py", 141),
]
#: what must be in no GovSim prompt: our old conversation question, a payoff line
GOVSIM_ABSENT = ["how much each of you should catch", "Last round:", "reward"]
#: every departure the page's GovSim table lists (its first column), each described there with its reason
GOVSIM_DEPARTURES = ["turn-taking", "the answer's form", "the answer's bounds", "reasoning budget and decoding",
                     "the framework", "memory retrieval", "quoted text", "the prompt's layout", "a persona",
                     "more than five fishers", "the agreed limit as a norm", "variants not built"]


def _govsim_month(catch: float = 8.0, said: str = "I propose we each catch at most 10 tons.", reading: str = "10",
                  months: int = 2, **sets):
    """govsim.yaml stepped `months` months with every LLM request recorded: each catch `catch`, each message `said`,
    the framework's reading `reading`, each thought and insight a fixed sentence."""
    from sim.core.spaces import Choice, Number
    from runner.config import load_yaml
    from sim.tick.broker import DecisionBroker

    def answer(r):
        if isinstance(r.space, Number):
            return min(catch, r.space.hi)
        if isinstance(r.space, Choice):
            return reading
        return "1. Sharing keeps the lake full (because of 1,2). 2. We talk." if r.phase == "reflect" else said

    cls = REGISTRY["commons"]
    fields = cls.Config.model_fields
    config = cls.Config(**{**{k: v for k, v in load_yaml(ROOT / "scenarios/commons/configs/govsim.yaml").items() if k in fields},
                           **sets})
    recorder = Recorder(each(answer))
    model = cls(config, seed=0, broker=DecisionBroker({"llm": recorder}), policy="llm")
    for _ in range(months):
        if model.running:
            model.step()
    return model, recorder.seen


def _by_phase(seen) -> dict[str, list[str]]:
    """Every rendered prompt (all messages joined) by phase, month 2's as `phase@2`."""
    out: dict[str, list[str]] = {}
    for request, messages in seen:
        key = request.phase + ("" if request.tick == 1 else f"@{request.tick}")
        out.setdefault(key, []).append("\n".join(m["content"] for m in messages))
    return out


@pytest.mark.parametrize("phase, quote, path, line", GOVSIM_QUOTES, ids=[f"{q[0]}:{q[3]}" for q in GOVSIM_QUOTES])
def test_govsim_s_text_is_in_our_prompt_and_on_the_page(phase, quote, path, line):
    """A GovSim quote (GOVSIM, `path`:`line`) is word for word in every prompt of its phase and on docs/protocols.md."""
    prompts = _by_phase(_govsim_month()[1])[phase]
    assert prompts and all(quote in p for p in prompts), (phase, quote)
    assert quote.strip() in PAGE, quote


def test_the_system_text_opens_every_fisher_s_single_user_turn():
    """GovSim sends one user turn that opens with the system text (no system message); so do our fishers' requests."""
    model, seen = _govsim_month()
    for request, messages in seen:
        assert [m["role"] for m in messages] == ["user"]
        if request.phase != "agree":  # (the framework's reading has no fisher's text: GovSim's framework prompt)
            name = ("John", "Kate", "Jack", "Emma", "Luke")[request.agent_id - 1]
            assert messages[0]["content"].startswith(f"You are {name}, a fisherman")
    reading = [m for r, m in seen if r.phase == "agree"]
    assert len(reading) == 2 and all(m[0]["content"].startswith("In the following conversation") for m in reading)


def test_no_govsim_prompt_primes_limits_or_shows_a_payoff():
    """Our old conversation question and the "Last round: reward N" line are in no prompt of any phase."""
    for prompts in _by_phase(_govsim_month()[1]).values():
        for prompt in prompts:
            assert not any(absent in prompt for absent in GOVSIM_ABSENT), prompt


def test_every_govsim_departure_is_listed_on_the_page_with_its_reason():
    """The page's GovSim table names each remaining departure (first column) and why."""
    section = PAGE[PAGE.index("## Fishery (`commons`) and GovSim"):PAGE.index("## Donor game")]
    rows = {line.split("|")[1].strip(): line for line in section.splitlines() if line.startswith("| ") and line.count("|") >= 5}
    for departure in GOVSIM_DEPARTURES:
        assert departure in rows, departure
        assert len(rows[departure].split("|")[-2].strip()) > 20  # its reason


def test_the_agreed_limit_is_read_from_the_chat_and_n_a_agrees_nothing():
    """Messages that name a limit agree nothing unless the framework reads an explicit agreement: N/A leaves no
    limit and no memory (the parser's median made one mention enough); a limit is every fisher's memory next month."""
    incoherent = "The group's agreed limit is 100 tons per fisher."
    model, seen = _govsim_month(said=incoherent, reading="N/A")
    assert model.agreed is None and model.norm is None
    assert not any("The community agreed" in "\n".join(m["content"] for m in ms) for _, ms in seen)
    model, seen = _govsim_month(said=incoherent, reading="12")
    assert model.agreed == 12.0 and model.norm == 12.0
    harvest2 = _by_phase(seen)["harvest@2"]
    assert all("The community agreed on a maximum limit of 12 tons of fish per person." in p for p in harvest2)


def test_a_collapsing_month_still_talks_then_ends():
    """GovSim holds the chat, the reading of the limit, the thoughts and the reflection in the month the lake
    collapses ("We want to see also the discussion in case no fish remain"); the run ends after that month."""
    model, seen = _govsim_month(catch=30.0, months=3)
    assert model.status == "collapsed" and model.tick == 1
    assert {r.phase for r, _ in seen} == {"harvest", "converse1", "converse2", "agree", "plan", "memorize", "reflect"}
    assert model.summary()["survival_time"] == 1.0


def test_a_fisher_remembers_what_it_wanted_and_caught_not_the_stock_left():
    """After the harvest a fisher learns its own "wanted W, caught C" and the mayor's report, not the stock left."""
    _, seen = _govsim_month(catch=7.0)  # 35 tons caught, 65 left
    chat = _by_phase(seen)["converse1"][0]
    assert "John wanted to catch 7 tons of fish, and caught 7 tons." in chat
    assert "tons were left" not in chat and "65" not in chat
    assert "John caught 7 tons of fish. Kate caught 7 tons of fish." in chat


def test_govsim_s_reflection_keeps_each_numbered_insight_without_its_evidence():
    """Each insight of a reflection is a memory of its own, "(because of ...)" dropped, as GovSim keeps them."""
    model, _ = _govsim_month(months=1)
    kept = [item.text for item in model.agent_map()[1].memory.items if item.kind == "insight"]
    assert kept == ['"Sharing keeps the lake full"', '"We talk"']


def test_the_govsim_protocol_refuses_what_its_text_cannot_say():
    """GovSim's system text states a lake of 100 tons that doubles; its month has no votes: refused in one line."""
    from pydantic import ValidationError

    cls = REGISTRY["commons"]
    for bad in ({"capacity": 200}, {"regrowth": 3}, {"norm_formation": True}, {"conversation_rounds": 0}, {"fishers": 1}):
        with pytest.raises(ValidationError, match="protocol govsim"):
            cls.Config(**{"protocol": "govsim", "conversation_rounds": 2, **bad})
    assert cls.Config(protocol="govsim", conversation_rounds=2, fishers=37).fishers == 37  # any number of fishers
