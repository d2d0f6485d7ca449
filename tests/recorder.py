"""A backend for protocol tests: it keeps every request with the messages the built-in template renders for it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from agents.llm.prompts import builtin_template, render_messages
from sim.contracts.backend import Backend
from sim.core.contracts import Decision, DecisionRequest
from sim.core.profiles import CONTRACT, profile


class Recorder(Backend):
    """Plays the `llm` backend: records each request with its rendered messages (`seen`) and answers the batch with
    `answer(requests)`."""

    name = "llm"

    def __init__(self, answer: Callable[[Sequence[DecisionRequest]], list[Decision]]) -> None:
        self.answer = answer
        self.seen: list[tuple[DecisionRequest, list[dict[str, str]]]] = []

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        self.seen += [(r, render_messages(r, builtin_template(profile(CONTRACT)))) for r in requests]
        return self.answer(requests)


def each(value: Callable[[DecisionRequest], Any]) -> Callable[[Sequence[DecisionRequest]], list[Decision]]:
    """A batch answer that gives every request `value(request)`."""
    return lambda requests: [Decision(r.agent_id, r.phase, value(r), "llm") for r in requests]
