"""The community's editions: what a run of each decision contract is made with, where the community changed.

| contracts | a member's text in prompts and memory notes | opinion clusters | the run's figures beside MoltBook's |
|---|---|---|---|
| 1-4 | as written (a feed collapses whitespace and cuts it) | every gap-split group of >= 1% of members | duplicates: repeats after the first |
| 5 | `sim.core.text.quote` | every gap-split group of >= 1% of members | duplicates: repeats after the first |
| 6-7 | `sim.core.text.quote` | major and minor clusters no wider than epsilon, and the share in none | duplicates: repeats after the first |
| 8- (every new run) | as 6 | as 6 | as MoltBook's code: every copy of a squished text, the reply network's reciprocity, comments per post, the activity Gini |

`SocialModel` picks its run's edition once (sim.tick.editions); the old pieces are in `scenarios.social.legacy`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from typing import TYPE_CHECKING, Optional

from scenarios.social import legacy
from scenarios.social.metrics import cluster_figures
from scenarios.social.report import moltbook_figures
from sim.core.text import quote
from sim.tick.editions import Editions

if TYPE_CHECKING:
    from scenarios.social.model import SocialModel

TEXT_SHOWN = 120  # characters of an item's text quoted in a prompt


@dataclass(frozen=True)
class SocialEdition:
    """The community's pieces that changed between decision contracts."""

    #: an item's text as a feed (or a comment's question) quotes it
    shown: Callable[[str], str]
    #: a member's own text in its memory note ("I wrote a post: ...")
    note: Callable[[str], str]
    #: the opinion-cluster metrics (opinions, cluster_gap, epsilon)
    clusters: Callable[[Sequence[float] | np.ndarray, float, float], dict[str, float]]
    #: the run's figures compared with MoltBook's (final metrics)
    compared: Callable[["SocialModel"], dict[str, Optional[float]]]


CURRENT = SocialEdition(partial(quote, limit=TEXT_SHOWN), quote, cluster_figures, moltbook_figures)
CONTRACT_6 = SocialEdition(partial(quote, limit=TEXT_SHOWN), quote, cluster_figures, legacy.repeat_share)
CONTRACT_5 = SocialEdition(partial(quote, limit=TEXT_SHOWN), quote, legacy.first_clusters, legacy.repeat_share)
CONTRACT_1 = SocialEdition(legacy.plain_shown, legacy.as_written, legacy.first_clusters, legacy.repeat_share)

EDITIONS: Editions[SocialEdition] = Editions({1: CONTRACT_1, 5: CONTRACT_5, 6: CONTRACT_6, 8: CURRENT})
