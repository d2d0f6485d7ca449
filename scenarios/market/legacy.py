"""The market's pieces as runs of earlier decision contracts were made with, frozen so that those runs replay.

Nothing here is used by a new run: `scenarios.market.editions` points the older contracts at these pieces.
Do not change them; a change of the current behaviour copies the piece it changes here first.

- contracts 1-4: a customer's request, a business's description and its name as a pay option enter prompts
  as written (stripped), not through `sim.core.text.quote` / `one_line`;
- contracts 1-5: the welfare ratio divides by the menu-price optimum (a run whose businesses discount can pass 1),
  and the random-match baselines take 200 draws of `random.Random` (`python_baselines`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from scenarios.market.data import Market
from scenarios.market.measures import random_welfare_median
from scenarios.market.search import SearchIndex

MAX_DESCRIPTION = 600  # characters of a business description quoted in a prompt (frozen)


def stripped(text: str) -> str:
    """Contracts 1-4: a customer's request, or a business's name as a pay option, as written (stripped)."""
    return text.strip()


def plain_description(text: str) -> str:
    """Contracts 1-4: a business's description cut to MAX_DESCRIPTION characters, stripped, between plain quotes."""
    return f'"{text[:MAX_DESCRIPTION].strip()}"'


def menu_optimum(market: Market, index: SearchIndex, floor_pct: Sequence[int], optimal: float) -> float:
    """Contracts 1-5: the welfare ratio divides by the menu-price optimum, whatever the businesses may charge."""
    return optimal


def python_baselines(market: Market, index: SearchIndex, customers: int, draws: Optional[int],
                     seed: int) -> tuple[dict[str, float], int]:
    """Contracts 1-5: the random-match medians over `draws` (default 200) draws of `random.Random` (`exact_stream`)."""
    draws = draws or 200
    return {"baseline_any_median": random_welfare_median(market, index, amenities=False, draws=draws, seed=seed),
            "baseline_any_amenities_median": random_welfare_median(market, index, amenities=True, draws=draws,
                                                                   seed=seed + 1)}, draws


def no_figures(ratio_optimum: float, draws: int) -> dict[str, float]:
    """Contracts 1-5: the run's final figures hold neither the ratio's optimum nor the baselines' draws."""
    return {}
