"""Gymnasium spaces for the environment's agents: the action space follows each agent's pending request.

A scenario's decisions change their space from tick to tick (a catch up to the stock, a talk phase
that asks for text, a sanction that names a fisher), so an agent's `action_space` is one object per
agent (PettingZoo asks for the same object each time) whose `sample` and `contains` answer for the
request the agent has now: a value of its `sim.core.spaces` space (a number, an option, a text, a form).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Optional

import gymnasium
import numpy as np

from sim.core.spaces import Choice, Form, Number, Space, SpaceError, Text

_WORDS = ("we", "should", "fish", "less", "more", "share", "the", "lake", "give", "trust", "post", "agree", "fair", "now")


def sample_value(space: Space, rng: np.random.Generator) -> Any:
    """A value inside `space` drawn from `rng`: a number on its grid, an option, a few words, a form of those."""
    if isinstance(space, Choice):
        return space.options[int(rng.integers(len(space.options)))]
    if isinstance(space, Number):
        return space.snap(float(rng.uniform(space.lo, space.hi)))
    if isinstance(space, Form):
        return {k: sample_value(sub, rng) for k, sub in space.fields}
    return " ".join(_WORDS[int(i)] for i in rng.integers(len(_WORDS), size=int(rng.integers(1, 9))))


class DecisionSpace(gymnasium.spaces.Space):
    """The actions an agent may take now: those of its pending request's space (None when it has none)."""

    def __init__(self, pending: Callable[[], Optional[Space]], seed: Optional[int] = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)
        self._pending = pending

    @property
    def space(self) -> Optional[Space]:
        """The space of the agent's pending request (None: it decides nothing at this step): a copy, as observations
        are (the request's own is what its answer is checked against)."""
        space = self._pending()
        return None if space is None else copy.deepcopy(space)

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        space = self._pending()
        return None if space is None else sample_value(space, self.np_random)

    def contains(self, x: Any) -> bool:
        space = self._pending()
        if space is None:
            return x is None
        try:
            space.validate(x)
        except (SpaceError, TypeError, ValueError):
            return False
        return True

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        space = self._pending()
        return f"DecisionSpace({space.describe() if space is not None else 'nothing to decide'})"


class ObservationSpace(gymnasium.spaces.Space):
    """An observation: a dict of the tick, the phase, the structured request and its rendered prompt."""

    KEYS = frozenset({"tick", "phase", "request", "messages", "prompt"})

    def __init__(self, seed: Optional[int] = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        return {"tick": 0, "phase": None, "request": None, "messages": [], "prompt": ""}

    def contains(self, x: Any) -> bool:
        return isinstance(x, dict) and self.KEYS <= set(x)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "ObservationSpace(tick, phase, request, messages, prompt)"
