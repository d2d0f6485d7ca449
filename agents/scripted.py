"""The scripted-policy backend: plain Python strategies behind the same decision layer as LLMs.

A strategy is a function `(request, rng) -> value` that reads only the request's
`observation` (plain data) and a `random.Random` seeded from the request, so its answer does
not depend on which other requests share the batch.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sim.broker import fallback_decision
from sim.contracts import Decision, DecisionRequest

Strategy = Callable[[DecisionRequest, random.Random], Any]


class LazyRandom:
    """Stands in for `random.Random(seed)`, but seeds the generator only on first use.

    Most scripted strategies never draw; seeding a Mersenne Twister costs more than their
    whole decision. Draws are identical to `random.Random(seed)`'s (every attribute is the
    real generator's, bound and cached on first access).
    """

    __slots__ = ("_seed", "_rng", "__dict__")

    def __init__(self, seed: int) -> None:
        self._seed = seed
        self._rng: random.Random | None = None

    def __getattr__(self, name: str):
        if self._rng is None:
            self._rng = random.Random(self._seed)
        value = getattr(self._rng, name)
        self.__dict__[name] = value
        return value


class ScriptedBackend:
    """Answers each request with the strategy it names: one of the scenario's, or a reference
    `module:function` / `path/to/file.py:function` to a function of the user's (loaded once)."""

    name = "scripted"

    def __init__(self, strategies: Mapping[str, Strategy]) -> None:
        self.strategies = dict(strategies)

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        out: list[Decision] = []
        for request in requests:
            strategy = self.strategies.get(request.strategy or "")
            if strategy is None and request.strategy and ":" in request.strategy:  # module:function, file.py:function
                from scenarios import load_strategy

                strategy = self.strategies[request.strategy] = load_strategy(request.strategy)
            if strategy is None:
                out.append(fallback_decision(request, self.name, f"unknown strategy {request.strategy!r}"))
                continue
            value = strategy(request, LazyRandom(request.seed))
            out.append(Decision(agent_id=request.agent_id, phase=request.phase, value=value, backend=self.name))
        return out
