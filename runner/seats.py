"""The prompts a stored run's scripted agents would have been sent, had an LLM sat in their seats.

A scripted agent reads only its request's observation, so a run renders no prompt for it (no memory,
no feedback, no situation text: scenarios skip them for speed). To give a scripted decision the prompt
an LLM agent in that seat would have read, the run is made again, in a scratch store, with every scripted
seat played as an LLM seat (`policy: llm`, its strategy kept) whose "LLM" answers by the seat's
strategy: the scenario then keeps the seat's memory and feedback and renders its prompt with the run's
own template, exactly as for an LLM agent. The seats that were LLM agents answer what they answered.

The world must not notice: each remade decision is checked against the stored one (value by value, and
the rewards), and a scenario whose world changes when a seat is an LLM's (an LLM seat that writes a
strategy text, that reads its stance back, that speaks in a phase a scripted one skips) is refused with
the first difference named, never exported with prompts that do not belong to its decisions.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.llm.backend import LLMBackend
from agents.llm.base import Answer, Messages
from agents.llm.prompts import get_template
from agents.scripted import ScriptedBackend
from runner.config import bind
from runner.execution import RunFailed, execute
from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from sim.core.spec import RunSpec
from sim.store.store import Store
from sim.store.tables import AgentStep, LLMCall

#: where a refusal sends the user
_SEE = "docs/learning.md; --decisions llm exports the LLM agents' only"
#: (tick, agent id, phase)
Seat = tuple[int, int, str]


@dataclass(frozen=True)
class SeatCall:
    """One scripted decision with the prompt an LLM in its seat would have been sent."""

    tick: int
    agent_id: int
    phase: str
    strategy: str
    prompt: str  # the chat messages as the store's one text (agents.llm.backend.prompt_text)
    value: Any
    fallback: bool  # the stored decision was its request's default (an unknown strategy)


class _StrategyLLM:
    """An `LLM` that answers each request by its seat's strategy (or, for a seat an LLM played, by the stored answer)."""

    model_id = "scripted"

    def __init__(self, strategies: ScriptedBackend, stored: Mapping[Seat, Any]) -> None:
        self.sampling: dict[str, Any] = {}
        self._strategies, self._stored = strategies, stored
        self.strategy_of: dict[Seat, str] = {}

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        out: list[Answer] = []
        for r in requests:
            seat = (r.tick, r.agent_id, r.phase)
            if seat in self._stored:  # an LLM agent of the run: what it answered
                out.append(Answer(self._stored[seat], raw="stored"))
                continue
            try:
                decision = self._strategies.decide_batch([r])[0]
            except ValueError as exc:  # a phase only an LLM seat has (a strategy without an answer to it): its default
                out.append(Answer(None, error=str(exc)))
                continue
            self.strategy_of[seat] = r.strategy or ""
            out.append(Answer(None, error=decision.reason) if decision.fallback else Answer(decision.value))
        return out


def _as_llm_seats(spec: RunSpec) -> RunSpec:
    """`spec` with every scripted agent an LLM agent (its strategy kept)."""
    config = dict(spec.config)
    if isinstance(config.get("population"), list):
        config["population"] = [{**g, "policy": "llm"} if isinstance(g, dict) and (g.get("policy") or spec.policy) == "scripted"
                                else g for g in config["population"]]
    policy = "llm" if spec.policy == "scripted" else spec.policy
    return spec.model_copy(update={"config": config, "policy": policy})


def _same(a: Any, b: Any) -> bool:
    """Stored and remade values equal (numbers to 1e-9, relative)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def scripted_prompts(store: Store, run_id: str) -> list[SeatCall]:
    """Every scripted decision of the stored run, with the prompt an LLM agent in its seat would have been sent, in tick
    and request order. UsageError (one line) where the run cannot be remade so: a fork (export its parent), or a
    scenario whose world changes when a seat is an LLM's (the first difference named)."""
    run = store.get_run(run_id)
    if run.parent_id is not None and run.origin == "fork":
        raise UsageError(f"run {run.id} is a fork: its scripted decisions' prompts are rendered from runs made from "
                         f"tick 1; export its parent {run.parent_id}, or run the fork's config as a run of its own")
    spec = RunSpec.model_validate(run.spec)
    last = run.ticks  # (a run still going commits more meanwhile: its ticks up to this one are exported)
    steps = {(r.tick, r.agent_id): r for rows in store.iter_rows(AgentStep, run.id) for r in rows if r.tick <= last}
    stored_llm = {(c.tick, c.agent_id, c.phase): c.value for rows in store.iter_rows(LLMCall, run.id) for c in rows
                  if c.tick <= last}
    scripted_ids = {aid for (_, aid), r in steps.items() if r.backend == "scripted"}
    if not scripted_ids:
        return []
    shadow = _as_llm_seats(spec)
    strategies = ScriptedBackend(bind(spec).scenario_class.strategies, rng=spec.profile.rng)
    llm = _StrategyLLM(strategies, stored_llm)
    backends = {"scripted": strategies,
                "llm": LLMBackend("scripted", {}, llm=llm, prompt=get_template(spec.llm.template, spec.profile))}
    with tempfile.TemporaryDirectory(prefix="societas-seats-") as tmp:
        scratch = Store(f"sqlite:///{Path(tmp) / 'seats.db'}")
        try:
            try:
                result = execute(shadow, scratch, backends=backends, stop_after=last or None)
            except RunFailed as exc:
                raise UsageError(f"run {run.id}'s scripted seats cannot be played as LLM seats to render their prompts: "
                                 f"{exc.reason}") from None
            remade = {(r.tick, r.agent_id): r for rows in scratch.iter_rows(AgentStep, result.run_id) for r in rows}
            calls = [c for rows in scratch.iter_rows(LLMCall, result.run_id) for c in rows]
        finally:
            scratch.close()
    _check_same_world(run.scenario, steps, remade, scripted_ids)
    out = []
    for c in calls:
        seat = (c.tick, c.agent_id, c.phase)
        if c.agent_id not in scripted_ids or seat in stored_llm:
            continue
        original = steps.get((c.tick, c.agent_id))
        if original is None or c.phase not in (original.action or {}):
            continue  # a phase only an LLM seat has (a reflection): the scripted agent made no such decision
        out.append(SeatCall(c.tick, c.agent_id, c.phase, llm.strategy_of.get(seat, ""), c.prompt, c.value,
                            bool(original.fallback)))
    return out


def _check_same_world(scenario: str, steps: Mapping[tuple[int, int], Any], remade: Mapping[tuple[int, int], Any],
                      scripted: set[int]) -> None:
    """Refuse (UsageError) when the remade run's scripted decisions or rewards differ from the stored ones."""
    for key, original in sorted(steps.items()):
        got = remade.get(key)
        where = f"tick {key[0]}, agent {key[1]}"
        if got is None:
            raise UsageError(f"{scenario}: the run changes when its scripted agents sit as LLM agents (no step at {where}), "
                             f"so its scripted decisions' prompts cannot be rendered ({_SEE})")
        if key[1] in scripted:
            for phase, value in (original.action or {}).items():
                if not _same(value, (got.action or {}).get(phase)):
                    raise UsageError(f"{scenario}: the run changes when its scripted agents sit as LLM agents ({phase} at "
                                     f"{where}: {value!r} stored, {(got.action or {}).get(phase)!r} remade), so its "
                                     f"scripted decisions' prompts cannot be rendered ({_SEE})")
        if not _same(float(original.reward), float(got.reward)):
            raise UsageError(f"{scenario}: the run changes when its scripted agents sit as LLM agents (reward at {where}: "
                             f"{original.reward!r} stored, {got.reward!r} remade), so its scripted decisions' prompts "
                             f"cannot be rendered ({_SEE})")
