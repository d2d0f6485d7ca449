"""The catch limit a fisher's message proposes ("so let us each catch 5" proposes 5): the fishery's norm from talk.

A talk message or a conversation round is free text; the median of the limits the fishers state is the group's
norm (talk) or, in the compact protocol, next month's agreed limit. `stated_limit` reads the amount a message
*concludes* with, in digits or in words, and never a share, a sum of money, a label or a count of people or
months. Runs made under decision contracts before 8 read the first phrase instead
(`scenarios.commons.legacy.first_phrased_limit`), and before 6 the first amount (`first_stated_amount`).

How a message is read (one pass per step, linear in its length):

0. lower-cased; en and em dashes become "-"; thousands separators go ("10,000" is 10000; "10, 20" stays);
1. number words become digits: zero to ninety-nine, "a hundred", "a dozen"; "one" stays a word where it is a
   pronoun ("no one", "each one", "one of", "one more");
2. numbers that are never a catch are masked: percentages, money, labels ("month 3", "fisher 2"), counts of
   people or time ("3 fishers", "5 of us", "2 months");
3. a range or an alternative is its last number ("between 5 and 10", "7 or 8 tons", "5-10 tons each": 10);
4. the text is cut into clauses (at . ; : ! ? before a blank, at ", ", and at so, but, and, because, then,
   while, which, since);
5. in each clause, *strong* candidates are numbers phrased as a limit ("at most 8", "no more than 8", "limit
   of 8", "under 12"), after a verb of catching or proposing ("catch 8", "take only 8", "propose 8", "stick to
   8"), per fisher ("8 each", "8 tons per person"), or after "more than" in a clause with a negation ("nobody
   should fish more than 10"); *weak* candidates are bare tonnages ("8 tons"). A number after "not", "instead
   of", "rather than" or "except" is dropped, as is one after "more than / over / above" without a negation (a
   threshold, "if anyone catches more than 15"). A clause that warns ("would", "too much", "collapse", "empty")
   or tells the past ("caught", "last month", "already") gives nothing; one about the lake's state ("lake",
   "left", "remain", "have", "total", "holds") gives no weak candidate;
6. the result is the last strong candidate, else the last weak one, else None (0 is a limit: test with `is
   None`).
"""

from __future__ import annotations

import re
from typing import Optional

_UNIT_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
               "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS_WORDS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_UNITS = {w: k for k, w in enumerate(_UNIT_WORDS)}
_TENS = {w: 20 + 10 * k for k, w in enumerate(_TENS_WORDS)}
#: a number written in words: "twenty-five", "twenty five", "ninety", "a hundred", "a dozen", "seven"
_NUMBER_WORD = re.compile(
    r"\b(?:(?P<tens>" + "|".join(_TENS_WORDS) + r")(?:[\s-]+(?P<ones>" + "|".join(_UNIT_WORDS[1:10]) + r"))?"
    r"|(?P<hundred>(?:a\s+|one\s+)?hundred)|(?P<dozen>(?:a\s+)?dozen)|(?P<unit>" + "|".join(_UNIT_WORDS) + r"))\b")
#: "one" as a pronoun, never a number: "no one", "each one", "one of", "one another", "one more"
_PRONOUN_ONE = re.compile(r"\b(?:no|every|each|any|the|this|that|some)\s+one\b|\bone(?=\s+(?:of|another|else|more)\b)")
_THOUSANDS = re.compile(r"\b\d{1,3}(?:,\d{3})+\b")

_N = r"(\d+(?:\.\d+)?)"
_TONS = r"(?:\s*(?:tons?|tonnes?|t)\b)"
MASK = "#"
#: numbers that are never a catch (step 2)
_NOT_AN_AMOUNT = (
    re.compile(_N + r"\s*(?:%|percent\b|per\s+cent\b)"),
    re.compile(r"\$\s*" + _N + r"|" + _N + r"\s*(?:\$|dollars?\b|usd\b|k\b)"),
    re.compile(r"\b(?:month|round|fisher|fisherman|player|week|day|year|step|number|no\.|#)\s*" + _N),
    re.compile(_N + r"\s*(?:months?|weeks?|days?|years?|rounds?|fishers?|fishermen|people|persons|of us|times)\b"),
)
#: a range or an alternative (step 3): its last number stands for it
_RANGE = re.compile(r"\bbetween\s+" + _N + r"\s+and\s+" + _N
                    + r"|" + _N + r"\s*(?:-|to|or)\s*" + _N + r"(?=" + _TONS + r"|\s+each\b)")
#: where a clause ends (step 4)
_CLAUSE_END = re.compile(r"[.;:!?](?=\s|$)|,\s|\b(?:so|but|and|because|then|while|which|since)\b")
_NEGATION = re.compile(r"\b(?:no|not|nobody|none|never|don't|do not|shouldn't|should not|mustn't|must not|won't|cannot|"
                       r"can't)\b")
_WARNING = re.compile(r"\b(?:would|could|too (?:much|many|high)|collapse\w*|empty|deplet\w*|run out|wipe out)\b")
_PAST = re.compile(r"\b(?:caught|took|had|last month|so far|already|earned)\b")
_STATE = re.compile(r"\b(?:lake|stock|pond|population|left|leaves?|leaving|remain\w*|stay\w*|regrow\w*|reproduc\w*|"
                    r"double\w*|capacity|total|altogether|together|have|has|there (?:are|is)|holds?|earn\w*)\b")
#: a number that is not the proposal: "not 10", "instead of 12", "except 20"
_EXCLUDED = re.compile(r"\b(?:not|instead of|rather than|except)\s+" + _N)
#: "more than 15": a threshold, or (in a clause with a negation) a limit
_THRESHOLD = re.compile(r"\b(?:more than|over|above|beyond|exceed\w*)\s+" + _N)
#: numbers phrased as the amount each fisher should catch (step 5, strong)
_STRONG = (
    re.compile(r"\b(?:at most|no more than|not more than|no higher than|up to|a maximum of|maximum of|max(?:imum)?|"
               r"limits?(?: of| to| is| at)?|caps?(?: of| at| to)?|quotas?(?: of| is)?|under|below|less than|fewer than)\s*"
               + _N),
    re.compile(r"\b(?:catch(?:es|ing)?|fish(?:ing)?|takes?|taking|harvest(?:s|ing)?|propos(?:e|ing)|suggest(?:s|ing)?|"
               r"keep(?: it)? to|stick (?:to|with)|agree (?:on|to)|reduce(?: it)? to|cut(?: it)? to|"
               r"limit (?:it |ourselves |us )?to|go with|settle on)\s+"
               r"(?:(?:only|just|about|around|roughly|each|all|maybe|no more than|at most|up to)\s+)*" + _N),
    re.compile(_N + _TONS + r"?\s+(?:each|per fisher(?:man)?|per person|per head|apiece|a head)\b"),
)
_WEAK = re.compile(_N + _TONS)


def _number_word(m: re.Match[str]) -> str:
    if m.group("tens"):
        return str(_TENS[m.group("tens")] + (_UNITS[m.group("ones")] if m.group("ones") else 0))
    if m.group("hundred"):
        return "100"
    if m.group("dozen"):
        return "12"
    return str(_UNITS[m.group("unit")])


def words_to_digits(text: str) -> str:
    """Lower-case `text` with its number words in digits ("twenty-five tons" -> "25 tons"); a pronoun "one" stays."""
    out, last = [], 0
    for m in _PRONOUN_ONE.finditer(text):  # (the pronouns are kept as they are, the rest converted)
        out.append(_NUMBER_WORD.sub(_number_word, text[last:m.start()]))
        out.append(m.group(0))
        last = m.end()
    out.append(_NUMBER_WORD.sub(_number_word, text[last:]))
    return "".join(out)


def _normalised(text: str) -> str:
    """Steps 0-3: lower case, digits for words, never-a-catch numbers masked, ranges as their last number."""
    t = text.lower().replace("\u2013", "-").replace("\u2014", "-")
    t = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), t)
    t = words_to_digits(t)
    for pattern in _NOT_AN_AMOUNT:
        t = pattern.sub(MASK, t)
    return _RANGE.sub(lambda m: m.group(2) or m.group(4), t)


def _clauses(text: str) -> list[tuple[int, str]]:
    """(offset, clause) of each clause of `text` (step 4)."""
    out, start = [], 0
    for m in _CLAUSE_END.finditer(text):
        out.append((start, text[start:m.start()]))
        start = m.end()
    out.append((start, text[start:]))
    return out


def stated_limit(text: str) -> Optional[float]:
    """The catch limit a message proposes per fisher: the amount it concludes with, or None (see the module)."""
    strong: list[tuple[int, float]] = []
    weak: list[tuple[int, float]] = []
    for offset, clause in _clauses(_normalised(text)):
        if _WARNING.search(clause) or _PAST.search(clause):
            continue
        dropped = {m.start(1) for m in _EXCLUDED.finditer(clause)}
        thresholds = [(m.start(1), float(m.group(1))) for m in _THRESHOLD.finditer(clause)]
        if _NEGATION.search(clause):
            strong += [(offset + at, value) for at, value in thresholds]  # "nobody should fish more than 10"
        else:
            dropped.update(at for at, _ in thresholds)  # "if anyone catches more than 15"
        for pattern in _STRONG:
            strong += [(offset + m.start(1), float(m.group(1))) for m in pattern.finditer(clause) if m.start(1) not in dropped]
        if not _STATE.search(clause):
            weak += [(offset + m.start(1), float(m.group(1))) for m in _WEAK.finditer(clause) if m.start(1) not in dropped]
    found = strong or weak
    return max(found)[1] if found else None
