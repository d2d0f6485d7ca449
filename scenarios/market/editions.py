"""The market's editions: what a run of each decision contract is made with, where the market changed.

| contracts | untrusted text in prompts (requests, descriptions, names) | welfare ratio's optimum; random-match baselines |
|---|---|---|
| 1-4 | as written | menu prices; 200 draws of `random.Random` |
| 5 | `sim.core.text.quote` / `one_line` | menu prices; 200 draws of `random.Random` |
| 6- (every new run) | `sim.core.text.quote` / `one_line` | the lowest prices sellers may charge; `baseline_draws` of numpy |

`MarketModel` picks its run's edition once (sim.tick.editions); the old pieces are in `scenarios.market.legacy`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Optional

from scenarios.market import legacy, measures
from scenarios.market.data import Market
from scenarios.market.search import SearchIndex
from sim.core.text import one_line, quote
from sim.tick.editions import Editions

MAX_DESCRIPTION = 600  # characters of a business description quoted in a prompt


@dataclass(frozen=True)
class MarketEdition:
    """The market's pieces that changed between decision contracts."""

    #: a customer's request as its assistant's prompt quotes it
    request: Callable[[str], str]
    #: a business's description as a listing quotes it
    description: Callable[[str], str]
    #: a business's name as an option of the customer's pay choice
    option: Callable[[str], str]
    #: what the welfare ratio divides by, from the market, the sellers' lowest prices (% of menu) and the menu optimum
    ratio_optimum: Callable[[Market, SearchIndex, Sequence[int], float], float]
    #: the random-match medians and the draws they took (market, index, customers, configured draws, seed)
    baselines: Callable[[Market, SearchIndex, int, Optional[int], int], tuple[dict[str, float], int]]
    #: the final figures the definitions add (the ratio's optimum, the draws)
    figures: Callable[[float, int], dict[str, float]]


CURRENT = MarketEdition(quote, partial(quote, limit=MAX_DESCRIPTION), one_line, measures.ratio_optimum,
                        measures.baselines, measures.corrected_figures)
CONTRACT_5 = MarketEdition(quote, partial(quote, limit=MAX_DESCRIPTION), one_line, legacy.menu_optimum,
                           legacy.python_baselines, legacy.no_figures)
CONTRACT_1 = MarketEdition(legacy.stripped, legacy.plain_description, legacy.stripped, legacy.menu_optimum,
                           legacy.python_baselines, legacy.no_figures)

EDITIONS: Editions[MarketEdition] = Editions({1: CONTRACT_1, 5: CONTRACT_5, 6: CURRENT})
