"""A scenario's behaviour by decision contract: old behaviour is an old piece picked once, never a switch in its rules.

A stored run replays with the prompt text and the metric definitions it was made with: its spec names its
decision contract (`RunSpec.contract`, sim.core.profiles). Where a scenario changed between contracts, it
gathers what changed into one object, its *edition* (a frozen dataclass of pieces: functions, classes,
templates), and declares the table of its editions by the first contract each applies from:

    class CommonsModel(SocietyModel):
        editions = Editions({1: CONTRACT_1, 3: CONTRACT_3, 6: CURRENT})

`SocietyModel.__init__` picks the run's edition once (`model.edition`); the rules call its pieces and never
ask which contract they run under. The current pieces live with the scenario's rules, the old ones frozen
in its `legacy.py` (PettingZoo's `pistonball_v6`: an old behaviour is an old module, not a branch).

A change that alters a scenario's decisions or stored metrics for an existing spec: copy the pieces it changes
into the scenario's legacy.py as they are, change the current ones, add a profile to sim/core/profiles.py
(a new `CONTRACT`) and a row to the scenario's table that points the contracts before it at the frozen edition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class Editions(Generic[T]):
    """A scenario's editions by the first decision contract each applies from (the table starts at contract 1)."""

    def __init__(self, since: Mapping[int, T]) -> None:
        if 1 not in since:
            raise ValueError(f"the editions must start at decision contract 1, not {min(since, default=None)}")
        self._since = sorted(since.items())

    def at(self, contract: int) -> T:
        """The edition runs of decision contract `contract` are made with: the latest one starting at or before it."""
        chosen = self._since[0][1]
        for first, edition in self._since:
            if first > contract:
                break
            chosen = edition
        return chosen

    def firsts(self) -> tuple[int, ...]:
        """The contracts an edition starts at, oldest first."""
        return tuple(first for first, _ in self._since)
