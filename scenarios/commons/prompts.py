"""The fishery's prompt text: the situation every fisher shares, then the fisher's own part, and each phase's question.

The words are in `scenarios.commons.templates`; this module fills them from the model's state. The shared part
comes first (the local engine forwards it once per batch), the fisher's own after it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from scenarios.commons import templates as tpl
from scenarios.commons.config import CommonsConfig

if TYPE_CHECKING:
    from scenarios.commons.model import CommonsModel, Fisher

MAX_MESSAGES_SHOWN = 8  # a prompt quotes at most this many of the month's messages
CONVERSE = tuple(f"converse{k}" for k in range(1, 11))  # the post-harvest conversation's rounds (conversation_rounds)


def situation(model: "CommonsModel", fisher: "Fisher", obs: Mapping[str, Any], question: str,
              after_harvest: bool = False) -> tuple[str, str]:
    """(the situation every fisher reads, the fisher's own part) for `question`.

    After the harvest (the conversation, the reflection) the month's report says what was caught, so the
    situation does not repeat last month's totals.
    """
    c, chronicle = model.config, model.chronicle
    last = own = ""
    if obs["last_total"] is not None and not after_harvest:
        last = tpl.LAST.substitute(total=f"{obs['last_total']:g}", mean=f"{obs['last_mean']:.1f}")
        own = chronicle.own_last(fisher)
    norm = tpl.NORM.substitute(norm=f"{model.norm:g}") if model.norm is not None else ""
    collapse = tpl.COLLAPSE.substitute(collapse=f"{c.collapse_below:g}") if c.disclose_collapse else ""
    month = (tpl.MONTH_OF if c.disclose_horizon else tpl.MONTH).substitute(month=obs["month"], months=c.months)
    shared = tpl.SITUATION.substitute(
        fishers=obs["fishers"], month=month, stock=f"{model.stock:g}", capacity=f"{c.capacity:g}",
        regrowth=f"{c.regrowth:g}", collapse=collapse, last=last, norm=norm, messages=chronicle.others_said(fisher),
    )
    return shared + chronicle.block(question), tpl.OWN_SITUATION.substitute(agent=fisher.unique_id, own=own)


def question(config: CommonsConfig, phase: str) -> str:
    """The question of `phase` (every round of the conversation asks the same)."""
    fine = f"{config.sanction_fine:g}" + (" (more for repeat violators)" if config.sanction_growth else "")
    key = "converse" if phase in CONVERSE else phase
    return tpl.QUESTIONS[key].substitute(cost=f"{config.sanction_cost:g}", fine=fine)
