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
from sim.rng import RNG_VERSION, rng_version, strategy_rng_class

Strategy = Callable[[DecisionRequest, random.Random], Any]


class ScriptedBackend:
    """Answers each request with the strategy it names: one of the scenario's, or a reference
    `module:function` / `path/to/file.py:function` to a function of the user's (loaded once)."""

    name = "scripted"

    def __init__(self, strategies: Mapping[str, Strategy], rng: int = RNG_VERSION) -> None:
        self.strategies = dict(strategies)
        self.rng = rng  # the run's contract version (sim.rng): which generator a strategy draws from

    def bind(self, run_id: str, spec: Any) -> None:
        """Draw with the generator of the run's contract version (a run stored under version 1 replays with its own)."""
        self.rng = rng_version(spec.contract)

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        out: list[Decision] = []
        make_rng = strategy_rng_class(self.rng)  # looked up once per batch: the loop below is the hot path
        for request in requests:
            strategy = self.strategies.get(request.strategy or "")
            if strategy is None and request.strategy and ":" in request.strategy:  # module:function, file.py:function
                from scenarios import load_strategy

                strategy = self.strategies[request.strategy] = load_strategy(request.strategy)
            if strategy is None:
                out.append(fallback_decision(request, self.name, f"unknown strategy {request.strategy!r}"))
                continue
            value = strategy(request, make_rng(request.seed))
            out.append(Decision(agent_id=request.agent_id, phase=request.phase, value=value, backend=self.name))
        return out
