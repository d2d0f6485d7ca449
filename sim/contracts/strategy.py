"""What a scripted strategy is, and the marks by which a scenario declares its columnar forms.

A strategy is a function `(request, rng) -> value` that reads only the request's `observation`
(plain data) and a `random.Random` seeded from the request, so its answer does not depend on which
other requests share the batch. A scenario marks the strategies that can answer a whole
`RequestBatch` at once (the scripted backend reads the marks):
- `@observation_only`: its answer reads the observation and phase alone (no draw, nothing of the
  agent's own, no side effect): asked once for the whole group;
- `@answers_many(many)`: `many(observation, phase, seeds) -> list | None` gives the answers for
  these request seeds at once (e.g. vectorised counter draws, `sim.core.rng.randbelow_many`), equal to
  asking one by one; None where it has no columnar answer (that phase is asked one by one).
The marks are kept beside the function, not on it, so a wrapper (`functools.wraps` copies a
function's attributes) is not taken for the function it wraps.
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Callable
from typing import Any, Optional, TypeVar

from sim.core.contracts import DecisionRequest

Strategy = Callable[[DecisionRequest, random.Random], Any]
Many = Callable[[dict, str, Any], Optional[list]]
S = TypeVar("S", bound=Callable[..., Any])

_OBSERVATION_ONLY: "weakref.WeakSet[Callable[..., Any]]" = weakref.WeakSet()
_MANY: "weakref.WeakKeyDictionary[Callable[..., Any], Many]" = weakref.WeakKeyDictionary()


def observation_only(strategy: S) -> S:
    """Mark a strategy whose answer reads the observation and phase alone: it never draws, reads
    nothing of the agent's own and has no side effect, so one call answers every agent of a batch."""
    _OBSERVATION_ONLY.add(strategy)
    return strategy


def answers_many(many: Many) -> Callable[[S], S]:
    """Give a strategy a columnar form: `many(observation, phase, seeds)` returns its answers for
    all these request seeds (a uint64 array) at once, equal to calling it once per request, or
    None for a phase it has no columnar answer for."""
    def mark(strategy: S) -> S:
        _MANY[strategy] = many
        return strategy

    return mark


def is_observation_only(strategy: Callable[..., Any]) -> bool:
    """Whether `strategy` itself (not a function it wraps) was marked `@observation_only`."""
    return strategy in _OBSERVATION_ONLY


def columnar_form(strategy: Callable[..., Any]) -> Optional[Many]:
    """The `many` that `@answers_many` gave `strategy` itself, or None."""
    return _MANY.get(strategy)
