"""What a business reads from a customer's message (`offer_items: message`, `offer_amenities: asked`).

Magentic Marketplace's business composes its proposal from the conversation: its LLM picks the menu items the
customer asked for and answers questions (about amenities, say) from its prompt, where its menu and amenities are
listed. The embedded model cannot write Magentic's structured `OrderProposal`, so the platform reads the message
for it, by rule: the menu items the message names, one of each, and the amenities it names, answered Yes or No
from the business's data ("Outdoor Seating: Yes", Magentic's format for its features). A name counts as named
when its words appear in the message in order, as whole words, case and punctuation aside; of names that overlap
("Churros", "Smoky Churros") the longest is read. A business thus knows only what the message says.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache

_NOT_WORD = re.compile(r"[^0-9a-z]+")


def words(text: str) -> str:
    """`text` as the matching reads it: lower case, every run of other characters one space, padded by spaces."""
    return " " + " ".join(_NOT_WORD.sub(" ", text.lower()).split()) + " "


@lru_cache(maxsize=1 << 16)
def _key(name: str) -> str:
    """A menu item's or amenity's name as the matching reads it (names repeat across messages: made once)."""
    return words(name)


def named_in(message: str, names: Iterable[str]) -> list[str]:
    """The `names` the message names (whole words, in order), longest first; a name inside a longer one found at
    the same place is not read twice."""
    text = words(message)
    found = []
    for name in sorted(set(names), key=lambda n: (-len(_key(n)), n)):
        key = _key(name)
        if key.strip() and key in text:
            found.append(name)
            text = text.replace(key, " | ", 1)
    return found


def amenity_reply(amenities: Mapping[str, bool], asked: Iterable[str]) -> str:
    """The business's answer to the amenities a customer asked about, in Magentic's format: "Live Music: Yes; Free
    Wifi: No" (an amenity the business does not list is a No); empty when none was asked."""
    return "; ".join(f"{a}: {'Yes' if amenities.get(a, False) else 'No'}" for a in asked)
