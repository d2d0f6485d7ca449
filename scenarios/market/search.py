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

import heapq
import itertools
import random
import re
from collections.abc import Callable, Iterator, Sequence

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
    """Indexes built once per run, so that a query costs what its answer needs, not a scan of the market.

    - item -> the businesses selling it, as a set, in file order and (built on first use) in price order: the
      cheapest matches (`cheapest`) come from a walk down one price list or a set intersection, not a scan;
    - word -> the businesses whose text has it, as a bitset over rating rank (built on first use): a lexical query
      adds its words' bitsets with a bit-sliced counter, 64 businesses per machine word, and reads the best
      ranks of the highest score first.
    """

    def __init__(self, businesses: Sequence[Business]) -> None:
        self.businesses = businesses
        n = len(businesses)
        self.by_rating = sorted(range(n), key=lambda k: (-businesses[k].rating, k))
        rank = [0] * n
        for r, k in enumerate(self.by_rating):
            rank[k] = r
        items: dict[str, list[int]] = {}
        words: dict[str, list[int]] = {}
        for k, b in enumerate(businesses):
            for item in b.menu:
                items.setdefault(item, []).append(k)
            text = " ".join([b.name, b.description, *b.menu, *(a for a, v in b.amenities.items() if v)])
            for w in tokens(text):
                words.setdefault(w, []).append(rank[k])
        self.sellers = {i: tuple(ks) for i, ks in items.items()}
        self._item_sets = {i: frozenset(ks) for i, ks in items.items()}
        self._seller_arrays: dict[str, np.ndarray] = {}
        self._cents: dict[str, np.ndarray] = {}
        self._common: dict[frozenset[str], tuple[int, ...]] = {}
        names = sorted({a for b in businesses for a, v in b.amenities.items() if v})
        self._amenity_bit = {a: 1 << j for j, a in enumerate(names)} if len(names) < 63 else None
        if self._amenity_bit is not None:
            bit = self._amenity_bit
            self._amenity_masks = np.asarray([sum(bit[a] for a, v in b.amenities.items() if v) for b in businesses],
                                             dtype=np.int64)
        self._ranks = words
        self._bits: dict[str, int] = {}
        self._by_price: dict[str, list[tuple[float, int]]] = {}

    # ----- items ---------------------------------------------------------------------------------------------
    def selling_all(self, customer: Customer) -> Sequence[int]:
        """Businesses selling every requested item, in file order (several items: memoised per item set, the
        intersection is small and the measures ask for it more than once)."""
        if len(customer.items) == 1:
            return self.sellers.get(next(iter(customer.items)), ())
        wanted = frozenset(customer.items)
        got = self._common.get(wanted)
        if got is None:
            sets = sorted((self._item_sets.get(i, frozenset()) for i in wanted), key=len)
            got = self._common[wanted] = tuple(sorted(sets[0].intersection(*sets[1:]))) if sets else ()
        return got

    def cents(self, item: str) -> np.ndarray:
        """The menu prices of the item's sellers (file order) rounded to cents, as `menu_total` rounds a one-item
        request's total (built on first use)."""
        got = self._cents.get(item)
        if got is None:
            got = self._cents[item] = np.asarray([round(self.businesses[k].menu[item], 2)
                                                  for k in self.sellers.get(item, ())], dtype=float)
        return got

    def sellers_array(self, item: str) -> np.ndarray:
        """The businesses selling `item`, in file order, as an array (built on first use)."""
        arr = self._seller_arrays.get(item)
        if arr is None:
            arr = self._seller_arrays[item] = np.asarray(self.sellers.get(item, ()), dtype=np.int64)
        return arr

    def amenity_flags(self, ks: np.ndarray, required: Sequence[str]) -> np.ndarray:
        """Whether each business of `ks` has every required amenity (Business.has_amenities, one array operation)."""
        bit = self._amenity_bit
        if bit is None:
            return np.asarray([self.businesses[k].has_amenities(tuple(required)) for k in ks], dtype=bool)
        if any(a not in bit for a in required):
            return np.zeros(len(ks), dtype=bool)
        need = sum(bit[a] for a in set(required))
        return (self._amenity_masks[ks] & need) == need

    def _priced(self, item: str) -> list[tuple[float, int]]:
        got = self._by_price.get(item)
        if got is None:
            got = self._by_price[item] = sorted((self.businesses[k].menu[item], k) for k in self.sellers.get(item, ()))
        return got

    def cheapest(self, customer: Customer, want: Callable[[Business], bool] | None = None,
                 key: Callable[[float], float] = float) -> Iterator[int]:
        """Businesses selling every requested item (and passing `want`), cheapest first: by (key(menu total), file
        order), the menu total summed in the request's item order; exactly the order a sort of every match gives.

        One item: a walk down the item's price list, handing a business over once no later one can come before it
        (the key is monotone), so the first match costs a few steps however many businesses sell the item. Several
        items: the intersection of their seller sets (one C-level set operation; a handful of businesses sell
        them all), priced and sorted.
        """
        items = list(customer.items)
        if len(items) != 1:
            matches = [k for k in self.selling_all(customer) if want is None or want(self.businesses[k])]
            yield from sorted(matches, key=lambda k: (key(sum(self.businesses[k].menu[i] for i in items)), k))
            return
        heap: list[tuple[float, int]] = []
        for price, k in self._priced(items[0]):
            bound = key(price)
            while heap and heap[0][0] < bound:
                yield heapq.heappop(heap)[1]
            if want is None or want(self.businesses[k]):
                heapq.heappush(heap, (key(sum([price])), k))
        while heap:
            yield heapq.heappop(heap)[1]

    # ----- search --------------------------------------------------------------------------------------------
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
        """Matches with every required amenity first, then those without; each part cheapest first."""
        amenities = customer.amenities
        found = list(itertools.islice(self.cheapest(customer, lambda b: b.has_amenities(amenities)), bandwidth))
        if len(found) < bandwidth:
            found += itertools.islice(self.cheapest(customer, lambda b: not b.has_amenities(amenities)),
                                      bandwidth - len(found))
        return found

    def _bitset(self, word: str) -> int:
        """The word's businesses as an int whose bit r is set when the business of rating rank r has it."""
        bits = self._bits.get(word)
        if bits is None:
            flags = np.zeros(len(self.businesses), dtype=bool)
            flags[self._ranks[word]] = True
            bits = self._bits[word] = int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")
        return bits

    def search_text(self, text: str, bandwidth: int) -> list[int]:
        """A customer's own query (`customer_search`): the lexical ranking of its words, at most `bandwidth` results."""
        return self._lexical_words(tokens(text), bandwidth)

    def _lexical(self, customer: Customer, bandwidth: int) -> list[int]:
        """By the number of distinct request words in the business's text, then rating, then file order."""
        return self._lexical_words(tokens(" ".join([customer.request, *customer.items, *customer.amenities])), bandwidth)

    def _lexical_words(self, query: set[str], bandwidth: int) -> list[int]:
        """By the number of distinct `query` words in the business's text, then rating, then file order."""
        sets = [self._bitset(w) for w in sorted(query) if w in self._ranks]
        if not sets or bandwidth <= 0:
            return []
        counters: list[int] = []  # counters[j]: bit j of every business's score
        hits = 0
        for bits in sets:
            hits |= bits
            carry, j = bits, 0
            while carry:
                if j == len(counters):
                    counters.append(carry)
                    break
                counters[j], carry = counters[j] ^ carry, counters[j] & carry
                j += 1
        ranks: list[int] = []
        for score in range(len(sets), 0, -1):
            if score >> len(counters):
                continue
            level = hits
            for j, c in enumerate(counters):
                level &= c if score >> j & 1 else ~c
            ranks += _lowest_bits(level, bandwidth - len(ranks), len(self.businesses))
            if len(ranks) == bandwidth:
                break
        return [self.by_rating[r] for r in ranks]


def _lowest_bits(bits: int, count: int, width: int) -> list[int]:
    """The positions of the lowest `count` set bits of `bits` (a non-negative int of at most `width` bits)."""
    if count <= 64:
        out = []
        while bits and len(out) < count:
            low = bits & -bits
            out.append(low.bit_length() - 1)
            bits ^= low
        return out
    flags = np.unpackbits(np.frombuffer(bits.to_bytes((width + 7) // 8, "little"), dtype=np.uint8), bitorder="little")
    return [int(r) for r in np.flatnonzero(flags)[:count]]
