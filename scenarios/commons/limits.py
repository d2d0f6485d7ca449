"""The catch limit a fisher's message proposes ("let us each catch 5" proposes 5): the fishery's norm from talk.

A talk message or a conversation round is free text; the median of the limits the fishers state is the group's
norm (talk) or next month's agreed limit (GovSim's conversation). Runs made under decision contracts before 6 read
the first amount instead (`scenarios.commons.legacy.first_stated_amount`).
"""

from __future__ import annotations

import re
from typing import Optional

_NUM = r"(\d+(?:\.\d+)?)"
_UNIT = r"(?:\s*(?:tons?|t\b))?"
#: phrasings that make a number the amount each fisher should catch (the proposal): a limit or a verb of catching
_PROPOSAL = re.compile(
    r"(?:at most|no more than|not more than|up to|a maximum of|maximum of|max(?:imum)?|limits?(?: of| to| is| at)?|"
    r"caps?(?: of| at| to)?|quotas?(?: of| is)?)\s*" + _NUM
    + r"|(?:catch|catches|catching|fish|fishing|take|takes|taking|harvest|harvesting|propose|proposing|suggest|"
    r"suggesting|keep(?: it)? to|stick to|agree (?:on|to))\s+(?:(?:only|just|about|around|roughly|each|all|"
    r"maybe|no more than|at most)\s+)*" + _NUM,
    re.I)
#: a per-fisher amount without a verb ("12 tons each is fair"), and a bare amount ("5 tons is fine")
_EACH = re.compile(_NUM + _UNIT + r"\s+(?:each|per fisher|per person|per head|apiece)", re.I)
_AMOUNT = re.compile(_NUM + r"\s*(?:tons?|t\b)", re.I)
#: words that make a clause about the lake or the past, not about what to catch ("the lake has 100 tons", "we caught")
_NOT_A_PROPOSAL = re.compile(r"\b(?:lake|stock|pond|fish population|left|remain\w*|regrow\w*|capacity|in total|"
                             r"altogether|collapse\w*|caught|took|last month|so far|already)\b", re.I)
#: where one clause ends: punctuation before a space or the end (not the point of "2.5"), or a conjunction
_CLAUSE = re.compile(r"[.;:!?,](?=\s|$)|\b(?:so|but|and|because|then|while)\b", re.I)


def stated_limit(text: str) -> Optional[float]:
    """The catch limit a message proposes per fisher, or None.

    A number counts where it is phrased as the amount to catch: after "at most / no more than / limit
    (of) / cap / quota", or after "catch / take / fish / harvest / propose / suggest" (with "only",
    "each", "about" between); the first such phrase in the text wins. Failing one, in the first clause
    that is not about the lake or the past ("lake", "stock", "left", "regrows", "caught", "last month",
    ...), "N (tons) each / per fisher / apiece", else a bare "N tons". So "The lake has 100 tons, so let
    us each catch 5." proposes 5; "The lake regrows 25 tons a month" and "100 tons are left." propose
    nothing; "I think 2.5 tons is fair." proposes 2.5; "month 2" is never an amount.
    """
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
