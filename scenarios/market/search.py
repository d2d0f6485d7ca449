"""Search over a market's businesses, with indexes built once per run (never a scan per query).

Algorithms (each returns at most `bandwidth` business indices, best first):
- `optimal`: only businesses selling every requested item (intersection of the item index),
  those with every required amenity first, then by the menu total of the request, then file order;
- `lexical`: number of distinct request words found in the business's text (name, description,
  menu items, amenities it has), ties by rating, then file order;
- `simple`: by rating, then file order (the same list for everyone);
- `random`: a seeded uniform sample.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

import numpy as np

from scenarios.market.data import Business, Customer

ALGORITHMS = ("optimal", "lexical", "simple", "random")
_WORD = re.compile(r"[a-z0-9]+")
STOPWORDS = frozenset(
    "a an and are as at be both but by can could do find for from has have i if in into is it its me my of on or "
    "our please so that the their them these this those to us we what which who will with would you your".split()
)


def tokens(text: str) -> set[str]:
    """Lower-case words of two letters or more, stopwords dropped."""
    return {w for w in _WORD.findall(text.lower()) if len(w) > 1 and w not in STOPWORDS}


class SearchIndex:
    """Item index (item -> businesses) and token index (word -> businesses), built once."""

    def __init__(self, businesses: Sequence[Business]) -> None:
        self.businesses = businesses
        n = len(businesses)
        items: dict[str, list[int]] = {}
        words: dict[str, list[int]] = {}
        for k, b in enumerate(businesses):
            for item in b.menu:
                items.setdefault(item, []).append(k)
            text = " ".join([b.name, b.description, *b.menu, *(a for a, v in b.amenities.items() if v)])
            for w in tokens(text):
                words.setdefault(w, []).append(k)
        self.items = {i: frozenset(ks) for i, ks in items.items()}
        self.words = {w: np.asarray(ks, dtype=np.int64) for w, ks in words.items()}
        self.rating = np.asarray([b.rating for b in businesses], dtype=float)
        self.by_rating = sorted(range(n), key=lambda k: (-businesses[k].rating, k))
        self._selling: dict[str, list[int]] = {}

    def selling_all(self, customer: Customer) -> list[int]:
        """Businesses selling every requested item, in file order (memoised per customer)."""
        got = self._selling.get(customer.id)
        if got is None:
            sets = sorted((self.items.get(i, frozenset()) for i in customer.items), key=len)
            common = set(sets[0]).intersection(*sets[1:]) if sets else set()
            got = self._selling[customer.id] = sorted(common)
        return got

    def search(self, algorithm: str, customer: Customer, bandwidth: int, rng: random.Random) -> list[int]:
        """At most `bandwidth` business indices for this customer, best first."""
        if algorithm == "optimal":
            return self._optimal(customer, bandwidth)
        if algorithm == "lexical":
            return self._lexical(customer, bandwidth)
        if algorithm == "simple":
            return self.by_rating[:bandwidth]
        if algorithm == "random":
            n = len(self.businesses)
            return rng.sample(range(n), min(bandwidth, n))
        raise ValueError(f"unknown search {algorithm!r}; valid: {', '.join(ALGORITHMS)}")

    def _optimal(self, customer: Customer, bandwidth: int) -> list[int]:
        def key(k: int):
            b = self.businesses[k]
            return (not b.has_amenities(customer.amenities), sum(b.menu[i] for i in customer.items), k)

        return sorted(self.selling_all(customer), key=key)[:bandwidth]

    def _lexical(self, customer: Customer, bandwidth: int) -> list[int]:
        query = tokens(" ".join([customer.request, *customer.items, *customer.amenities]))
        postings = [self.words[w] for w in query if w in self.words]
        if not postings:
            return []
        scores = np.bincount(np.concatenate(postings), minlength=len(self.businesses))
        hit = np.nonzero(scores)[0]
        # lexsort: last key is primary -> score desc, rating desc, index asc
        order = np.lexsort((hit, -self.rating[hit], -scores[hit]))
        return [int(k) for k in hit[order[:bandwidth]]]
