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


class ScriptedBackend:
    """Answers each request with the strategy it names."""

    name = "scripted"

    def __init__(self, strategies: Mapping[str, Strategy]) -> None:
        self.strategies = dict(strategies)

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        out: list[Decision] = []
        for request in requests:
            strategy = self.strategies.get(request.strategy or "")
            if strategy is None:
                out.append(fallback_decision(request, self.name, f"unknown strategy {request.strategy!r}"))
                continue
            value = strategy(request, random.Random(request.seed))
            out.append(Decision(agent_id=request.agent_id, phase=request.phase, value=value, backend=self.name))
        return out
