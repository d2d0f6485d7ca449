"""Paired timing rounds: how the benchmarks measure a ratio on a shared VM."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Optional


def wall(fn: Callable[[], object]) -> Callable[[], float]:
    """A timer for `fn`: calls it and returns the wall seconds it took."""
    def timer() -> float:
        started = time.perf_counter()
        fn()
        return time.perf_counter() - started

    return timer


def rounds(timers: Mapping[str, Callable[[], float]], repeat: int,
           best_of: Optional[Mapping[str, int]] = None) -> dict[str, list[float]]:
    """Each timer's seconds in each of `repeat` rounds.

    A timer returns the seconds it measured (`wall(fn)` times a whole call; a benchmark may time
    only part of one). Within a round the timers run back to back and the first place passes on
    every round (with two, each goes first in turn), so a slow spell of the machine falls on every
    side of a ratio; a timer's time in a round is the best of `best_of[name]` calls (default 1).
    """
    names = list(timers)
    times: dict[str, list[float]] = {name: [] for name in names}
    for k in range(repeat):
        first = k % len(names) if names else 0
        for name in names[first:] + names[:first]:
            times[name].append(min(timers[name]() for _ in range((best_of or {}).get(name, 1))))
    return times
