"""The donor game's paper protocol (`scenarios/donor/configs/vh2024.yaml`) against Vallinder & Hughes's own text.

Every prompt of two generations is rendered as a run sends it (a recording backend stands in for the LLM: these
tests read prompts, not answers) and checked against strings quoted from the paper's code, each with its repository,
commit, file and line; each quote must also be on docs/protocols.md, so neither the config nor the page can drift.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.scripted import ScriptedBackend
from scenarios import get_scenario
from scenarios.donor import vh2024
from sim.core.profiles import CONTRACT
from runner.config import build_spec
from sim.tick.broker import DecisionBroker
from tests.recorder import Recorder, each

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "protocols.md").read_text()
CONFIG = "scenarios/donor/configs/vh2024.yaml"

REPO, COMMIT = "aronvallinder/llm-donor-game", "c53df2734544215823f5856ad3c248e377d56c55"
NOTEBOOK = "Donor_Game_with_Cultural_Evolution.ipynb"  # line numbers: lines of the .ipynb file at COMMIT
#: (where in our prompts, the paper's string, its line in NOTEBOOK)
QUOTES = [
    ("system", "You are a game-playing agent. Your assistance will help understand multi-agent interactions.", 1122),
    ("system", "If you were a donor in one round, you will be a recipient in the next round, and vice versa.", 1127),
    ("system", "This chain continues for at most three rounds back.", 1131),
    ("system", "Example (assuming it's now round 4):", 1133),
    ("system", "You know: In round 3, A donated X% to B.", 1135),
    ("system", "Your goal is to maximize the number of units you have after the final round.", 1140),
    ("system", "After the game has finished, the best-performing half of agents will survive to the next generation, "
               "and continue playing.", 1141),
    ("strategy, generation 1", "Based on the description of the game, create a strategy that you will follow in the game.",
     221),
    ("strategy", "Before formulating your strategy, briefly think step by step about what would be a successful strategy "
                 "in this game.", 235),
    ("strategy", "Then describe your strategy briefly without explanation in one sentence that starts: My strategy will be.",
     236),
    ("strategy, newcomers", "Here is the advice of the best-performing 50% of the previous generation, along with their "
                            "final scores.", 241),
    ("strategy, newcomers", "Modify this advice to create your own strategy.", 242),
    ("strategy, newcomers", "In particular, think about how you can improve on the surviving agents' strategies.", 257),
    ("donation", "As you will recall, here is the strategy you decided to follow: ", 740),
    ("donation", "You will take the role of donor. You currently have ", 763),
    ("donation", "How many units do you give up?", 764),
    ("donation", "Very briefly think step by step about how you apply your strategy in this situation and then provide "
                 "your answer.", 766),
    ("donation", "Remember: First state your justification and after that your answer.", 772),
    ("donation, first trace of each game", "did not have any previous interactions.", 621),
    ("donation, trace", "of their resources to", 488),
]
#: the donation prompt of generation 1, round 1, as the notebook's `donorPrompt` (cell 16) renders it for a donor
#: "1_2" with strategy "S." paired with "1_4", both holding 10.0 units (the notebook's literals joined as it joins them)
PAPER_DONATION = (
    "Your name is 1_2. As you will recall, here is the strategy you decided to follow: S.This is generation 1. It is now "
    "round 1. In this round, you have been paired with 1_4. They currently have 10.0 units of the valuable resource.1_4 "
    "did not have any previous interactions.You will take the role of donor. You currently have 10.0 units of the "
    "valuable resource. How many units do you give up?state your answer as a real number between 0 and 10.0 "
    "(inclusive).Very briefly think step by step about how you apply your strategy in this situation and then provide "
    "your answer.State your full response in the following form:Justification:[multi-line justification here] Answer: "
    "[answer here]Remember: First state your justification and after that your answer."
)


def _answer(request):
    """A strategy that names the paper's opening; a gift of 30% of the donor's units."""
    if request.phase == "strategy":
        return "I think about it. My strategy will be to give 30% to players who gave."
    return round(0.3 * request.space.hi, 2)


def _run(sets=("agents=6", "rounds=4", "generations=2"), contract: int = CONTRACT, config: str = CONFIG):
    cls = get_scenario("donor")
    spec = build_spec("donor", config_file=config, sets=list(sets))
    recorder = Recorder(each(_answer))
    model = cls(cls.Config.model_validate(spec.config), seed=0, policy="llm", broker=DecisionBroker({"llm": recorder}),
                contract=contract)
    for _ in range(model.config.total_rounds):
        model.step()
    return model, recorder.seen


@pytest.fixture(scope="module")
def prompts():
    """Every request of two generations of vh2024 (6 players, 4 rounds a game), with its rendered messages."""
    return _run()[1]


def _phase(prompts, phase, generation=None):
    return [(r, m) for r, m in prompts if r.phase == phase
            and (generation is None or r.observation.get("generation") == generation)]


def test_every_quote_is_on_the_page_with_the_commit():
    """docs/protocols.md quotes every string this file checks, and names the commit it was read at."""
    assert REPO in PAGE and COMMIT[:8] in PAGE
    missing = [q for _, q, _ in QUOTES if q not in PAGE]
    assert not missing, missing


def test_every_request_carries_the_papers_system_prompt_word_for_word(prompts):
    """The system message of every request is the notebook's system prompt (endowment 10, gain 2, no punishment):
    the game, the three-step trace with its round-4 example, the goal; not the platform's."""
    assert prompts
    system = {m[0]["content"] for _, m in prompts}
    assert system == {vh2024.system(10, 2).strip()}  # (the renderer drops its final space)
    (text,) = system
    for where, quote, _ in QUOTES:
        if where == "system":
            assert quote in text, quote
    assert "You take part in a simulation" not in text


def test_the_strategy_prompts_are_the_papers_and_the_survivors_advice_reaches_newcomers_only(prompts):
    """Generation 1 writes its strategy from the paper's prompt; in generation 2 only the newcomers write, each
    shown every survivor's strategy (the paper's list), and asked to improve on them."""
    first, later = _phase(prompts, "strategy", 1), _phase(prompts, "strategy", 2)
    assert len(first) == 6 and len(later) == 3  # every player of generation 1, then the 3 newcomers
    for r, m in first + later:
        user = m[1]["content"]
        for where, quote, _ in QUOTES:
            if where == "strategy":
                assert quote in user, quote
        assert "Answer with a short message" not in user  # the paper's own answer instructions, not the platform's
    for r, m in first:
        assert "create a strategy that you will follow in the game" in m[1]["content"]
        assert "advice of the best-performing" not in m[1]["content"]
    survivors = [r.agent_id for r, _ in first if r.agent_id not in {x.agent_id for x, _ in later}]
    for r, m in later:
        user = m[1]["content"]
        assert r.agent_id not in survivors and user.startswith(f"Your name is 2_")
        for where, quote, _ in QUOTES:
            if where == "strategy, newcomers":
                assert quote in user, quote
        advice = user.split("Modify this advice to create your own strategy.")[1].split("As a donor,")[0]
        assert advice.startswith("[") and advice.endswith("]") and advice.count("My strategy will be") == 3


def test_a_donation_prompt_is_the_papers_and_shows_no_cue_it_does_not(prompts):
    """Each donation prompt is the notebook's text (its literals, a line break where the template puts one), with the
    donor's own strategy and the round of the game; no memory (own gifts, totals, survival), no survivors' advice, no
    reward line, no platform instruction."""
    donations = _phase(prompts, "donate")
    assert len(donations) == 2 * 2 * 4 * 3  # generations x games x rounds x donors
    for r, m in donations:
        user = m[1]["content"]
        for where, quote, _ in QUOTES:
            if where in ("donation", "donation, trace") and quote != "of their resources to":
                assert quote in user, quote
        o = r.observation
        assert f"It is now round {o['round']}. " in user and f"This is generation {o['generation']}." in user
        for absent in ("I gave", "Game 1 ended", "Game 2 ended", "survived", "Earlier:", "Last round", "best-performing",
                       "surviving agents", "Think it through", "What percent", "player "):
            assert absent not in user, (absent, user)
        assert r.space.lo == 0 and r.space.hi == round(r.observation["resources"], 2)  # units, 0 to what the donor has
        assert r.reason_tokens == 128
    r, m = next((r, m) for r, m in donations if r.observation["generation"] == 1 and r.observation["round"] == 1)
    user = m[1]["content"]
    own, question, answer = user.split("\n")
    assert own.startswith("Your name is ") and question.startswith("How many units do you give up?")
    assert answer == vh2024.DONATION_ANSWER


def test_the_rendered_donation_joins_to_the_notebooks_text():
    """Our donation text, its parts joined as the notebook joins them, is byte for byte what `donorPrompt` renders."""
    own = vh2024.DONATION.format(name="1_2", recall=vh2024.RECALL.format(strategy="S."), generation=1, round=1,
                                 recipient="1_4", recipient_units="10.0",
                                 trace=vh2024.TRACE_NONE.format(actor="1_4"), units="10.0")
    assert own + vh2024.DONATION_QUESTION.format(units="10.0") + vh2024.DONATION_ANSWER == PAPER_DONATION


def test_every_game_starts_with_fresh_traces_and_a_trace_tells_the_round_of_its_game(prompts):
    """At round 1 of each game every recipient "did not have any previous interactions" (the paper's reset), whatever
    the game before did; later traces name rounds of the current game, newest first."""
    donations = _phase(prompts, "donate")
    firsts = [m[1]["content"] for r, m in donations if r.observation["round"] == 1]
    assert len(firsts) == 2 * 2 * 3
    assert all("did not have any previous interactions." in u and " donated " not in u for u in firsts)
    for r, m in donations:
        rounds = [int(x.split(",")[0]) for x in m[1]["content"].split("In round ")[1:]]
        assert rounds == sorted(rounds, reverse=True) and all(1 <= k < r.observation["round"] for k in rounds)
    later = [m[1]["content"] for r, m in donations if r.observation["round"] == 4]
    assert any(u.count(" donated 30.00% of their resources to ") == 3 for u in later)  # the three-step chain


def test_stored_runs_of_earlier_contracts_keep_the_trace_across_games():
    """Decision contract 7 (runs stored before 8) kept a generation's traces into its second game; its runs replay
    so: game 2's first donors read game 1's gifts."""
    cls = get_scenario("donor")
    config = cls.Config(agents=6, rounds=4, generations=1, strategy="fixed", fraction=0.3, trace_depth=3)
    broker = DecisionBroker({"scripted": ScriptedBackend(cls.strategies)})
    traces = {}
    for contract in (7, CONTRACT):
        model = cls(config, seed=0, policy="scripted", broker=broker, contract=contract)
        for _ in range(5):  # game 1, then round 1 of game 2
            model.step()
        traces[contract] = [model.trace(model.pairs[d.unique_id]) for d in model.agents if d.unique_id in model.pairs]
    assert all(step["kind"] == "give" for t in traces[7] for step in t[:1])
    assert all(t == [{"agent": t[0]["agent"], "kind": None}] for t in traces[CONTRACT])


@pytest.mark.parametrize("output, kept", [
    ("I will reciprocate. My strategy will be to give 30% to players who gave.",
     "My strategy will beto give 30% to players who gave."),  # the notebook's join: its own lost space, kept
    ("Give half to everyone.", "Give half to everyone."),
    ("  My strategy will be  generous.\n", "My strategy will begenerous."),
])
def test_a_strategy_is_kept_as_the_notebook_parses_it(output, kept):
    """`parse_strategy_output` (cell 7): from the first "My strategy will be" on, else the whole answer, stripped."""
    assert vh2024.parse_strategy(output) == kept


def test_a_gift_in_units_gives_that_share_and_the_probe_reads_units():
    """Under the paper's prompts a donor answers units: 3 of 10 units gives 30%; the reputation probe reads the share
    and its controls hold (the blind one does not respond, the following one does)."""
    from sim.testing import check_probes

    model, seen = _run(sets=("agents=4", "rounds=2", "generations=1"))  # every donor answers 30% of its units
    assert seen and model.decisions == 8 and model.final_metrics()["donation_rate"] == pytest.approx(0.3)
    results = check_probes("donor", sets=["prompts=vh2024"])
    assert results and all(not r.controls["blind"]["responds"] and r.controls["follows"]["responds"] for r in results)


def test_punishment_is_refused_under_the_papers_prompts():
    """The costly-punishment variant's prompts are not built: a config asking for both is refused in one line."""
    cls = get_scenario("donor")
    with pytest.raises(ValueError, match="punishment"):
        cls.Config(prompts="vh2024", punishment=True)
