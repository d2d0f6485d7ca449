"""The fishery's pieces as runs of earlier decision contracts were made with, frozen so that those runs replay.

Nothing here is used by a new run: `scenarios.commons.editions` points the older contracts at these pieces.
Do not change them; a change of the current behaviour copies the piece it changes here first.

- contracts 1-2: the month's public events are lines in every fisher's memory (`MemoryLines`), and the
  situation repeats a fisher's own last catch and the others' messages of the month;
- contracts 1-5: a proposal is the first amount a message names (`first_stated_amount`), over-usage judges
  the catch landed against the month's opening stock (`landed_over_usage`), and the efficiency over the months
  survived is capped at 1 (`capped_efficiency`);
- contracts 1-7: the limit a conversation message states (and, from contract 6, a talk message's proposal) is
  the first phrase that names an amount to catch (`first_phrased_limit`): digits only, a percentage read as
  tons, the first amount rather than the one the message concludes with.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Optional

from sim.contracts.memory import Memory
from scenarios.commons import templates as tpl
from scenarios.commons.prompts import MAX_MESSAGES_SHOWN

if TYPE_CHECKING:
    from scenarios.commons.model import CommonsModel, Fisher


class MemoryLines:
    """Contracts 1-2: every public event is a line in the memory of each fisher taking part (no shared history)."""

    memory: Optional[Memory] = None

    def __init__(self, model: "CommonsModel") -> None:
        self.model = model

    def tell(self, kind: str, text: str) -> None:
        m = self.model
        for f in m.agents:
            if f.remembers and f.enter <= m.tick:  # a fisher that has not joined hears nothing
                f.remember(m.tick, kind, text)

    def caught(self, total: float, stock: float) -> str:
        return f"; all fishers caught {total:g}; {stock:g} tons were left"

    def own_last(self, fisher: "Fisher") -> str:
        last = self.model.last_catches
        return tpl.OWN.substitute(own=f"{last[fisher.unique_id]:g}") if fisher.unique_id in last else ""

    def others_said(self, fisher: "Fisher") -> str:
        m = self.model
        said = " ".join(f"fisher {a}: {m.quoted(text)}" for a, text in m.messages[:MAX_MESSAGES_SHOWN + 1]
                        if a != fisher.unique_id)
        return tpl.MESSAGES.substitute(messages=said) if said else ""

    def block(self, question: str) -> str:
        return ""

    def state(self) -> dict[str, Any]:
        return {}


_LIMIT_PATTERNS = [
    # "at most 10 tons", "no more than 10", "limit of 10", "catch 10 tons", "10 tons each", "propose 10"
    re.compile(r"(?:at most|no more than|not more than|up to|maximum of|max(?:imum)?|limit(?: of| to| is)?|cap(?: of| at)?)\s*(\d+(?:\.\d+)?)", re.I),
    re.compile(r"(\d+(?:\.\d+)?)\s*(?:tons?|t\b)(?:\s+(?:each|per fisher|per person|apiece))?", re.I),
    re.compile(r"(?:catch|fish|take|propose|suggest)\s+(?:only\s+)?(\d+(?:\.\d+)?)", re.I),
]


def first_stated_amount(text: str) -> Optional[float]:
    """Contracts 1-5 read a proposal as the first of `_LIMIT_PATTERNS` that matches anywhere: "The lake has 100 tons,
    so let us each catch 5." proposes 100."""
    for pattern in _LIMIT_PATTERNS:
        m = pattern.search(text)
        if m:
            return float(m.group(1))
    return None


def landed_over_usage(model: "CommonsModel", catches: list[float]) -> float:
    """Contracts 1-5: the share of this month's landed catches above the month's sustainable share of the opening stock."""
    share = model.stock_start * (1 - 1 / model.config.regrowth) / len(catches)
    return sum(x > share + 1e-9 for x in catches) / len(catches)


def capped_efficiency(total: float, reference: float) -> float:
    """Contracts 1-5: the efficiency over the months survived, capped at 1 (a collapse read as perfect efficiency)."""
    return min(1.0, total / reference)


_NUM = r"(\d+(?:\.\d+)?)"
_UNIT = r"(?:\s*(?:tons?|t\b))?"
_PROPOSAL = re.compile(
    r"(?:at most|no more than|not more than|up to|a maximum of|maximum of|max(?:imum)?|limits?(?: of| to| is| at)?|"
    r"caps?(?: of| at| to)?|quotas?(?: of| is)?)\s*" + _NUM
    + r"|(?:catch|catches|catching|fish|fishing|take|takes|taking|harvest|harvesting|propose|proposing|suggest|"
    r"suggesting|keep(?: it)? to|stick to|agree (?:on|to))\s+(?:(?:only|just|about|around|roughly|each|all|"
    r"maybe|no more than|at most)\s+)*" + _NUM,
    re.I)
_EACH = re.compile(_NUM + _UNIT + r"\s+(?:each|per fisher|per person|per head|apiece)", re.I)
_AMOUNT = re.compile(_NUM + r"\s*(?:tons?|t\b)", re.I)
_NOT_A_PROPOSAL = re.compile(r"\b(?:lake|stock|pond|fish population|left|remain\w*|regrow\w*|capacity|in total|"
                             r"altogether|collapse\w*|caught|took|last month|so far|already)\b", re.I)
_CLAUSE = re.compile(r"[.;:!?,](?=\s|$)|\b(?:so|but|and|because|then|while)\b", re.I)


def first_phrased_limit(text: str) -> Optional[float]:
    """Contracts 1-7 read a conversation message's limit (and contracts 6-7 a talk message's proposal) as the first
    phrase naming an amount to catch ("at most N", "catch N"), else in the first clause not about the lake or the
    past "N (tons) each", else a bare "N tons": "We have 60 tons; half must stay. So 6 each." states 60, "No more
    than ten tons each." nothing, "at most 10% of the fish, i.e. 8 tons" 10."""
    m = _PROPOSAL.search(text)
    if m:
        return float(next(g for g in m.groups() if g is not None))
    for clause in _CLAUSE.split(text):
        if _NOT_A_PROPOSAL.search(clause):
            continue
        m = _EACH.search(clause) or _AMOUNT.search(clause)
        if m:
            return float(m.group(1))
    return None
