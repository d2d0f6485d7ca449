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
