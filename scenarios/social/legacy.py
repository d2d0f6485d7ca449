"""The community's pieces as runs of earlier decision contracts were made with, frozen so that those runs replay.

Nothing here is used by a new run: `scenarios.social.editions` points the older contracts at these pieces.
Do not change them; a change of the current behaviour copies the piece it changes here first.

- contracts 1-4: a member's text enters a prompt as written: whitespace collapsed and cut with "..." in a feed
  (`plain_shown`), as it is in the member's own memory note (`as_written`);
- contracts 1-5: an opinion cluster is every gap-split group of at least 1% of the members, however wide
  (`first_clusters`);
- contracts 1-7: the run's duplicate share counts the messages whose exact text occurred earlier (repeats after
  the first, raw text), and no other figure is compared with MoltBook's (`repeat_share`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

import numpy as np

from scenarios.social.metrics import opinion_clusters

if TYPE_CHECKING:
    from scenarios.social.model import SocialModel

TEXT_SHOWN = 120  # characters of an item's text quoted in a prompt (frozen)


def plain_shown(text: str) -> str:
    """Contracts 1-4: an item's text with its whitespace collapsed, cut at TEXT_SHOWN ("..."), between plain quotes."""
    text = " ".join(text.split())
    return '"' + (text if len(text) <= TEXT_SHOWN else text[: TEXT_SHOWN - 3] + "...") + '"'


def as_written(text: str) -> str:
    """Contracts 1-4: a member's own text in its memory note, as written."""
    return text


def first_clusters(x: Sequence[float] | np.ndarray, gap: float, width: float) -> dict[str, float]:
    """Contracts 1-5: every gap-split group of >= 1% of the members is a cluster, however wide."""
    return {"opinion_clusters": float(opinion_clusters(x, gap, 0.01))}


def repeat_share(model: "SocialModel") -> dict[str, Optional[float]]:
    """Contracts 1-7: the share of all messages whose exact text occurred earlier in the run (k copies count k - 1)."""
    n = model.items.n
    return {"duplicate_share": (n - len(model.texts_seen)) / n if n else None}
