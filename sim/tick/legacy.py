"""The tick's pieces as runs of earlier decision contracts were made with, frozen so that those runs replay.

`SocietyModel` picks its pieces once, when it is built, from its run's decision profile (sim.core.profiles);
these are the old ones. Do not change them; a change of the current behaviour copies the piece it changes here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from sim.contracts.memory import Memory

#: what memory lines dated an item by before contract 5, in every scenario ("month 3")
MONTH = "month"


def default_memory(config: Any) -> Memory:
    """Contracts 1-2: every memory has Memory's defaults (8 items, a 400-character summary), whatever the config says."""
    return Memory()


def plain_quote(text: str, limit: Optional[int] = None) -> str:
    """Contracts 1-4: untrusted text (cut to `limit` characters) between plain double quotes, as it was written."""
    return f'"{text if limit is None else text[:limit]}"'


def bare(text: str) -> str:
    """Contracts 1-4: a name or label an agent or a data file wrote, as it was written."""
    return text


def shaped(payoffs: Mapping[int, float], rewards: Mapping[int, float]) -> Mapping[int, float]:
    """Contracts 1-5: Perolat's metrics were taken over the shaped rewards, not the material payoffs."""
    return rewards


def no_vector(payoffs: Mapping[int, float], *columns: Any) -> None:
    """Contracts 1-6: a reward is the payoff alone; agent steps store no reward vector."""
    return None
