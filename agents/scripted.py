"""The scripted-policy backend: plain Python strategies behind the same decision layer as LLMs.

A strategy is a function `(request, rng) -> value` that reads only the request's
`observation` (plain data) and a `random.Random` seeded from the request, so its answer does
not depend on which other requests share the batch.

A RequestBatch (10,000 fishers at harvest, all seeing the same lake) is answered in columns
when a strategy says how, with either attribute:
- `observation_only = True`: its answer reads the observation and phase alone (no draw, not the
  agent): asked once for the whole group;
- `many(observation, phase, seeds) -> list | None`: the answers for these request seeds at once
  (e.g. vectorised counter draws, `sim.rng.randbelow_many`), equal to asking one by one; None
  where it has no columnar answer (that phase is asked one by one).
Any other strategy is asked agent by agent, exactly as `decide_batch` asks it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sim.broker import fallback_decision
from sim.contracts import Decision, DecisionColumns, DecisionRequest, RequestBatch
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

    def _strategy(self, name: str | None) -> Strategy | None:
        strategy = self.strategies.get(name or "")
        if strategy is None and name and ":" in name:  # module:function, file.py:function
            from scenarios import load_strategy

            strategy = self.strategies[name] = load_strategy(name)
        return strategy

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        out: list[Decision] = []
        make_rng = strategy_rng_class(self.rng)  # looked up once per batch: the loop below is the hot path
        for request in requests:
            strategy = self._strategy(request.strategy)
            if strategy is None:
                out.append(fallback_decision(request, self.name, f"unknown strategy {request.strategy!r}"))
                continue
            value = strategy(request, make_rng(request.seed))
            out.append(Decision(agent_id=request.agent_id, phase=request.phase, value=value, backend=self.name))
        return out

    def decide_columns(self, batch: RequestBatch) -> DecisionColumns:
        """Answer a RequestBatch, strategy by strategy: in columns where the strategy says how (see the
        module's docstring), else request by request. The answers equal `decide_batch(list(batch))`'s."""
        n = len(batch)
        values: list[Any] = [None] * n
        special: dict[int, Decision] = {}
        names = batch.strategies
        first = names[0] if n else None
        if all(s == first for s in names) if n < 64 else len(set(names)) == 1:
            groups = {first: range(n)}
        else:
            groups = {}
            for i, name in enumerate(names):
                groups.setdefault(name, []).append(i)
        make_rng = strategy_rng_class(self.rng)
        for name, idx in groups.items():
            strategy = self._strategy(name)
            if strategy is None:
                for i in idx:
                    special[i] = fallback_decision(batch[i], self.name, f"unknown strategy {name!r}")
                    values[i] = batch.default
                continue
            got = None
            if self.rng != 1:  # columnar answers draw as CounterRandom does; version-1 runs draw one by one
                many = getattr(strategy, "many", None)
                if many is not None:
                    seeds = batch.seeds if isinstance(idx, range) else batch.seeds[idx]
                    got = many(batch.observation, batch.phase, seeds)
                    if got is not None and len(got) != len(idx):
                        raise RuntimeError(f"strategy {name!r} answered {len(got)} of {len(idx)} requests")
            if got is None and getattr(strategy, "observation_only", False):
                i = idx[0]
                got = [strategy(batch[i], make_rng(int(batch.seeds[i])))] * len(idx)
            if got is None:
                got = [strategy(batch[i], make_rng(int(batch.seeds[i]))) for i in idx]
            if isinstance(idx, range):
                values = list(got)
            else:
                for i, v in zip(idx, got):
                    values[i] = v
        return DecisionColumns(batch.phase, self.name, batch.agent_ids, values, special)
