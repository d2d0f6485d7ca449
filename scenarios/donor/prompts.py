"""The donor game's prompt text: the rules every player shares (with the survivors' strategies of the last
generation), then the player's own strategy, its round and its recipient's trace. The words are in
`scenarios.donor.templates`; a written strategy is untrusted text, quoted by the model."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scenarios.donor import templates as tpl
from scenarios.donor.config import DonorConfig

MAX_SURVIVOR_STRATEGIES = 6  # a prompt quotes at most this many survivors' strategies
STRATEGY_CHARS = 200  # and each at most this long


def rules(config: DonorConfig, generation: int, survivors: Sequence[str]) -> str:
    """The game's rules for `generation`, with the survivors' strategies (each already quoted) and the goal."""
    c = config
    shown = tpl.SURVIVORS.substitute(strategies=" ".join(survivors)) if survivors else ""
    return tpl.RULES.substitute(
        agents=c.agents, endowment=f"{c.endowment:g}", multiplier=f"{c.multiplier:g}",
        punish=tpl.PUNISH.substitute(pm=f"{c.punish_multiplier:g}") if c.punishment else "",
        generation=generation, survivors=shown) + (tpl.GOAL if c.goal else "")


def trace_text(trace: Sequence[dict[str, Any]]) -> str:
    """The recipient's reputation trace as the prompt tells it: its last action, its partner's before, ..."""
    parts = []
    for step in trace:
        if step["kind"] is None:
            parts.append(tpl.TRACE_NONE.substitute(actor=step["agent"]))
        elif step["kind"] == "punish":
            parts.append(tpl.TRACE_PUNISH.substitute(actor=step["agent"], amount=f"{step['amount']:.2f}", to=step["to"]))
        else:
            parts.append(tpl.TRACE_GIVE.substitute(actor=step["agent"], percent=f"{100 * step['share']:.0f}",
                                                   amount=f"{step['amount']:.2f}", to=step["to"]))
    return "".join(parts)
