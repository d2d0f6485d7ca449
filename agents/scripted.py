"""The scripted-policy backend: plain Python strategies behind the same decision layer as LLMs.

A strategy (`sim.contracts.strategy.Strategy`) is a function `(request, rng) -> value` of the scenario's or
the user's. A RequestBatch (10,000 fishers at harvest, all seeing the same lake) is answered in
columns where the scenario marked a strategy with a columnar form (`sim.contracts.strategy`:
`@observation_only`, asked once for the whole group; `@answers_many(many)`, all its agents at once);
every other strategy is asked agent by agent, in the batch's order, exactly as `decide_batch` asks it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sim.contracts.backend import Backend, fallback_decision
from sim.contracts.strategy import Strategy, columnar_form, is_observation_only
from sim.core.contracts import Decision, DecisionColumns, DecisionRequest, RequestBatch
from sim.core.profiles import CONTRACT, profile
from sim.core.refs import load_strategy
from sim.core.rng import CounterRandom, strategy_rng_class
from sim.core.spec import RunSpec


class ScriptedBackend(Backend):
    """Answers each request with the strategy it names: one of the scenario's, or a reference
    `module:function` / `path/to/file.py:function` to a function of the user's (loaded once)."""

    name = "scripted"

    def __init__(self, strategies: Mapping[str, Strategy], rng: int = profile(CONTRACT).rng) -> None:
        self.strategies = dict(strategies)
        self.rng = rng  # the random-stream version (sim.core.rng) strategies draw from: the run's profile's

    def bind(self, run_id: str, spec: RunSpec) -> None:
        """Draw with the stream of the run's decision profile (a run stored under contract 1 replays with its own)."""
        self.rng = spec.profile.rng

    def _strategy(self, name: str | None) -> Strategy | None:
        strategy = self.strategies.get(name or "")
        if strategy is None and name and ":" in name:  # module:function, file.py:function
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
        """Answer a RequestBatch: each group of agents whose strategy has a columnar form at once,
        every other agent one by one in the batch's order, as `decide_batch(list(batch))` would."""
        n = len(batch)
        values: list[Any] = [None] * n
        special: dict[int, Decision] = {}
        names = batch.strategies
        first = names[0] if n else None
        if all(s == first for s in names) if n < 64 else len(set(names)) == 1:
            groups: dict[Any, Sequence[int]] = {first: range(n)}
        else:
            groups = {}
            for i, name in enumerate(names):
                groups.setdefault(name, []).append(i)
        make_rng = strategy_rng_class(self.rng)
        rest: list[int] = []  # positions asked one by one
        for name, idx in groups.items():
            strategy = self._strategy(name)
            got = None
            if strategy is not None:
                many = columnar_form(strategy)
                if many is not None and make_rng is CounterRandom:  # columnar draws are CounterRandom's
                    got = many(batch.view(idx), batch.phase, batch.seeds if isinstance(idx, range) else batch.seeds[idx])
                    if got is not None and len(got) != len(idx):
                        raise RuntimeError(f"strategy {name!r} answered {len(got)} of {len(idx)} requests")
                if got is None and batch.columns is None and is_observation_only(strategy):  # (one observation for all)
                    i = idx[0]
                    got = [strategy(batch[i], make_rng(int(batch.seeds[i])))] * len(idx)
            if got is None:
                rest.extend(idx)
            elif isinstance(idx, range):
                values = list(got)
            else:
                for i, v in zip(idx, got):
                    values[i] = v
        if rest:
            rest.sort()  # in the batch's order, as decide_batch calls them (a strategy may keep state)
            for i in rest:
                request = batch[i]
                strategy = self._strategy(request.strategy)
                if strategy is None:
                    special[i] = fallback_decision(request, self.name, f"unknown strategy {request.strategy!r}")
                    values[i] = request.default
                else:
                    values[i] = strategy(request, make_rng(request.seed))
        return DecisionColumns(batch.phase, self.name, batch.agent_ids, values, special)
