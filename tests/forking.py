"""What a fork's config change does to a world: a model stepped with its config swapped after a tick, and every tick
afterwards fingerprinted (its record and every request its agents were shown), for tests of `fork_fields`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Optional

from agents.scripted import ScriptedBackend
from scenarios.registry import get_scenario
from sim.contracts.backend import Backend
from sim.core.contracts import Decision, DecisionColumns, DecisionRequest, RequestBatch
from sim.core.observations import plain_copy
from runner.config import build_spec
from runner.plans import swap_config
from sim.store.snapshots import snapshot_of
from sim.tick.broker import DecisionBroker


class Recording(Backend):
    """Answers as the scenario's scripted strategies do (or with each request's default), recording every request."""

    def __init__(self, name: str, strategies: Any, answer: str = "scripted", program: Optional[str] = None) -> None:
        self.name = name
        self.inner = ScriptedBackend(strategies)
        self.answer = answer
        self.program = program  # the text an LLM answers a write request with (synthesis)
        self.seen: list[Any] = []

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        if self.name != "scripted":  # what a scripted strategy makes of its request is in the tick's record
            self.seen.extend(_shown(r) for r in requests)
        return [self._one(r) for r in requests]

    def _one(self, r: DecisionRequest) -> Decision:
        if self.answer == "scripted" and r.strategy is not None:
            try:
                return self.inner.decide_batch([r])[0]
            except ValueError:  # a phase only LLM agents have (social's stance): the default
                pass
        value = self.program if self.program is not None and r.phase != "act" else r.default
        return Decision(r.agent_id, r.phase, value, self.name)

    def decide_columns(self, batch: RequestBatch) -> DecisionColumns:
        return DecisionColumns.of(batch.phase, self.name, self.decide_batch(list(batch)))


def _shown(r: DecisionRequest) -> str:
    """What a request shows its decider: the prompt's parts, the space, and what the sandbox is told (its limits).
    The scripted strategies' observation is left out: what they make of it is in the tick's record (their decisions),
    and an observation that merely echoes the config is no change of the world."""
    limits = plain_copy((r.observation or {}).get("limits"))
    return json.dumps([r.agent_id, r.phase, r.space.spec(), repr(r.default), r.context, r.own_context, r.question,
                       r.reason_tokens, r.memory, r.feedback, limits], sort_keys=True, default=repr)


def trace(scenario: str, sets: Sequence[str], policy: str, ticks: int,
          swap: Optional[tuple[int, dict[str, Any]]] = None, program: Optional[str] = None) -> list[str]:
    """Each tick's fingerprint (record and requests) of `scenario` under `sets` and `policy`, `ticks` ticks long, its
    config changed by `swap` = (tick, changes) after that tick as a fork changes it."""
    spec = build_spec(scenario, sets=list(sets), policy=policy)
    cls = get_scenario(scenario)
    backends = {name: Recording(name, cls.strategies, "default" if name == "synthesis" else "scripted", program)
                for name in ("scripted", "llm", "synthesis")}
    model = cls(cls.Config.model_validate(spec.config), seed=3, broker=DecisionBroker(backends), policy=policy)
    out = []
    if swap is not None and swap[0] == 0:  # a fork at 0: its config from the first tick on
        swap_config(model, {**model.config.model_dump(mode="json"), **swap[1]})
    for tick in range(1, ticks + 1):
        if not model.running:
            break
        model.step()
        seen = sorted(x for b in backends.values() for x in b.seen)
        for b in backends.values():
            b.seen = []
        snap = snapshot_of(model.last_record)
        out.append(json.dumps([snap.metrics, snap.state, snap.steps, snap.events, seen], sort_keys=True, default=repr))
        if swap is not None and tick == swap[0]:
            swap_config(model, {**model.config.model_dump(mode="json"), **swap[1]})
    out.append(json.dumps(model.summary(), sort_keys=True, default=repr))  # the final summary reads the config too
    model.release()
    return out
