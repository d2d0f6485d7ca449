"""The fishery's editions: what a run of each decision contract is made with, where the fishery changed.

| contracts | what every fisher saw | a proposal in a talk message | the limit a conversation message states | over-usage, efficiency over months survived |
|---|---|---|---|---|
| 1-2 | lines in each fisher's memory | the first amount named | the first phrase naming an amount | landed catches; capped at 1 |
| 3-5 | one shared history in the situation | the first amount named | the first phrase naming an amount | landed catches; capped at 1 |
| 6-7 | one shared history in the situation | the first phrase naming an amount | the first phrase naming an amount | catches chosen; uncapped |
| 8- (every new run) | one shared history in the situation | the amount the message concludes with (`stated_limit`) | the same | catches chosen; uncapped |

`CommonsModel` picks its run's edition once (sim.tick.editions); the old pieces are in `scenarios.commons.legacy`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from scenarios.commons import legacy
from scenarios.commons.history import Chronicle, SharedHistory
from scenarios.commons.limits import stated_limit
from scenarios.commons.report import chosen_over_usage, uncapped_efficiency
from sim.tick.editions import Editions

if TYPE_CHECKING:
    from scenarios.commons.model import CommonsModel


@dataclass(frozen=True)
class CommonsEdition:
    """The fishery's pieces that changed between decision contracts."""

    #: how the events every fisher sees reach them, built for the model
    chronicle: Callable[["CommonsModel"], Chronicle]
    #: the catch limit a talk message proposes (their median is the month's norm)
    proposal: Callable[[str], Optional[float]]
    #: this month's over-usage, from the model and the catches of the fishers taking part
    over_usage: Callable[["CommonsModel", list[float]], float]
    #: the efficiency over the months survived, from the total catch and its sustainable reference
    efficiency_survived: Callable[[float, float], float]
    #: the catch limit a message of the post-harvest conversation states (a norm statement; in the compact protocol
    #: their median is next month's agreed limit)
    said_limit: Callable[[str], Optional[float]]


CURRENT = CommonsEdition(SharedHistory, stated_limit, chosen_over_usage, uncapped_efficiency, stated_limit)
CONTRACT_6 = CommonsEdition(SharedHistory, legacy.first_phrased_limit, chosen_over_usage, uncapped_efficiency,
                            legacy.first_phrased_limit)
CONTRACT_3 = CommonsEdition(SharedHistory, legacy.first_stated_amount, legacy.landed_over_usage, legacy.capped_efficiency,
                            legacy.first_phrased_limit)
CONTRACT_1 = CommonsEdition(legacy.MemoryLines, legacy.first_stated_amount, legacy.landed_over_usage,
                            legacy.capped_efficiency, legacy.first_phrased_limit)

EDITIONS: Editions[CommonsEdition] = Editions({1: CONTRACT_1, 3: CONTRACT_3, 6: CONTRACT_6, 8: CURRENT})
