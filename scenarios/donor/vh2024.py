"""Vallinder & Hughes's prompts word for word (`prompts: vh2024`): the system prompt, the strategy prompts and the
donation prompt of aronvallinder/llm-donor-game, commit c53df2734544215823f5856ad3c248e377d56c55,
`Donor_Game_with_Cultural_Evolution.ipynb` (line numbers below are lines of that .ipynb file).

The texts are the notebook's, with its string literals concatenated as the notebook concatenates them (often
without a space: "interactions:You will see"), so a model reads what theirs read. What differs is listed in
docs/protocols.md: a written strategy enters a prompt through `sim.core.text.quote` (one line, between double
quotes it cannot close), the survivors' strategies are shown as a list of such quoted strings (the notebook
prints a Python list), amounts are shown rounded to cents, and the costly-punishment variant is not rendered.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: the system prompt (cell 21, lines 1122-1141; no punishment: the punishment line is empty), with the game's
#: endowment and multiplier; its continuation lines keep the notebook's 16 spaces of indentation
SYSTEM = (
    "You are a game-playing agent. Your assistance will help understand multi-agent interactions.\n"
    "                You are playing the following game. Each player is given an initial endowment of {endowment} units "
    "of a resource.\n"
    "                In each round, you are randomly paired with another individual.\n"
    "                One of you is a donor, and the other is a recipient. The donor decides to give up some amount of the "
    "resource (between 0 and the total number of units they possess).\n"
    "                The recipient receives {multiplier}x the number of units that the donor gave up.\n"
    "                If you were a donor in one round, you will be a recipient in the next round, and vice versa.\n"
    "                As a donor, you will receive limited information about the recipient and their recent interactions:\n"
    "                You will see what the recipient (let's call them A) did in the immediately preceding round only.\n"
    "                You will also see what A's partner from that round (let's call them B) did in their preceding "
    "round.\n"
    "                This chain continues for at most three rounds back.\n"
    "                Important: You do NOT have access to multiple rounds of information about A directly. You only know "
    "what A did in the single most recent round.\n"
    "                Example (assuming it's now round 4):\n"
    "                You are paired with A.\n"
    "                You know: In round 3, A donated X% to B.\n"
    "                You also know: In round 2, B donated Y% to C.\n"
    "                And finally: In round 1, C donated Z% to D.\n"
    "                Remember: This is all the information you have. You don't know what A did in rounds 1 or 2, only in "
    "round 3.\n"
    "                \n"
    "                Your goal is to maximize the number of units you have after the final round.\n"
    "                After the game has finished, the best-performing half of agents will survive to the next generation, "
    "and continue playing. "
)

#: the trace explanation both strategy prompts repeat (cell 8, lines 223-234 and 245-256)
_TRACE_EXPLAINED = (
    "As a donor, you will receive limited information about the recipient and their recent interactions:"
    "You will see what the recipient (let's call them A) did in the immediately preceding round only."
    "You will also see what A's partner from that round (let's call them B) did in their preceding round."
    "This chain continues for at most three rounds back."
    "Important: You do NOT have access to multiple rounds of information about A directly. You only know what A did in "
    "the single most recent round."
    "Example (assuming it's now round 4):"
    "You are paired with A."
    "You know: In round 3, A donated X% to B."
    "You also know: In round 2, B donated Y% to C."
    "And finally: In round 1, C donated Z% to D."
    "Remember: This is all the information you have. You don't know what A did in rounds 1 or 2, only in round 3."
    "In the first round, there will be no information about the recipient's previous behavior - think carefully about "
    "how much to donate in that case."
)
#: generation 1's strategy prompt (cell 8, lines 219-237): the situation, then how to answer
STRATEGY_FIRST = ("Your name is {name}. Based on the description of the game, create a strategy that you will follow in "
                  "the game. " + _TRACE_EXPLAINED)
STRATEGY_FIRST_ANSWER = (
    "Before formulating your strategy, briefly think step by step about what would be a successful strategy in this game."
    "Then describe your strategy briefly without explanation in one sentence that starts: My strategy will be."
)
#: a newcomer's strategy prompt in a later generation (lines 239-259), with the survivors' strategies
STRATEGY_LATER = ("Your name is {name}. How would you approach the game? Here is the advice of the best-performing 50% of "
                  "the previous generation, along with their final scores.Modify this advice to create your own strategy."
                  "{strategies}" + _TRACE_EXPLAINED)
STRATEGY_LATER_ANSWER = (
    "Before formulating your strategy, briefly think step by step about what would be a successful strategy in this game. "
    "In particular, think about how you can improve on the surviving agents' strategies."
    "Then describe your strategy briefly without explanation in one sentence that starts: My strategy will be."
)
#: where the written strategy starts (`parse_strategy_output`, cell 7, lines 192-200)
STRATEGY_START = "My strategy will be"

#: the donation prompt (`donorPrompt`, cell 16, lines 738-775, no punishment): the situation, the question and how
#: to answer
RECALL = "As you will recall, here is the strategy you decided to follow: {strategy}"
DONATION = ("Your name is {name}. {recall}This is generation {generation}. It is now round {round}. In this round, you "
            "have been paired with {recipient}. They currently have {recipient_units} units of the valuable resource."
            "{trace}You will take the role of donor. You currently have {units} units of the valuable resource. ")
DONATION_QUESTION = "How many units do you give up?state your answer as a real number between 0 and {units} (inclusive)."
DONATION_ANSWER = (
    "Very briefly think step by step about how you apply your strategy in this situation and then provide your answer."
    "State your full response in the following form:Justification:[multi-line justification here] Answer: [answer here]"
    "Remember: First state your justification and after that your answer."
)
#: the trace's sentences (cell 13, line 488; cell 14, line 621), newest first, joined by spaces (cell 15)
TRACE_GAVE = "In round {round}, {actor} donated {percent:.2f}% of their resources to {to}."
TRACE_NONE = "{actor} did not have any previous interactions."


def units(x: float) -> str:
    """An amount as the prompts show it: rounded to cents, as Python prints a float ("10.0", "13.6")."""
    return repr(round(float(x), 2) + 0.0)


def system(endowment: float, multiplier: float) -> str:
    """The system message of every request: the game, the three-step trace with its example, the goal."""
    return SYSTEM.format(endowment=f"{endowment:g}", multiplier=f"{multiplier:g}")


def strategies_list(quoted: Sequence[str]) -> str:
    """The survivors' strategies (each already quoted) as the notebook prints its list: `["...", "..."]`."""
    return "[" + ", ".join(quoted) + "]"


def parse_strategy(output: str) -> str:
    """The strategy a player keeps from its answer, as `parse_strategy_output` keeps it: from "My strategy will be" on
    (the notebook strips the rest and joins it without a space: "My strategy will beto ..."), else the whole answer."""
    head, found, rest = output.partition(STRATEGY_START)
    return STRATEGY_START + rest.strip() if found else output.strip()


def trace_text(trace: Sequence[dict[str, Any]], name_of: Callable[[int], str], round_of: Callable[[int], int]) -> str:
    """The recipient's trace in the paper's sentences, newest first: "In round 3, 1_4 donated 50.00% of their resources
    to 1_2." ... "1_2 did not have any previous interactions." (`name_of(id)`: a player's name; `round_of(tick)`: the
    round of the game a tick was)."""
    parts = []
    for step in trace:
        actor = name_of(step["agent"])
        if step["kind"] is None:
            parts.append(TRACE_NONE.format(actor=actor))
        else:
            parts.append(TRACE_GAVE.format(round=round_of(step["tick"]), actor=actor, percent=100 * step["share"],
                                           to=name_of(step["to"])))
    return " ".join(parts)
