"""The thread handshake between a running model and the environment that answers its focal agents.

The model runs in its own thread, unchanged (the tick, the broker, the reward layer, the store);
its focal agents are LLM agents whose `LLM` is an `OutsideLLM`: when the tick asks it for a batch,
it hands the requests and their rendered prompts to the environment and waits for the actions.
Exactly one of the two threads runs at any time, so a run made through the environment is as
deterministic as any other. A committed tick wakes nobody: its record is kept in `ticks` and read by the
environment with the next batch (or the run's end), so a step costs the two handoffs it needs, not one more
per tick (each wake-up of the waiting thread costs the running one a GIL handoff).
"""

from __future__ import annotations

import queue
from collections.abc import Sequence
from typing import Any

from agents.llm.base import Answer, Messages
from agents.llm.factory import ENV_SAMPLING
from sim.core.contracts import DecisionRequest


class EpisodeClosed(RuntimeError):
    """The environment was reset or closed before the episode ended: the run stops (stored as failed)."""


#: what the model thread sends: ("decide", requests, messages), ("end", result), ("closed", exc) or ("error", exc)
Message = tuple[Any, ...]
_CLOSE = object()


class OutsideLLM:
    """An `LLM` whose answers come from outside: each batch is handed over and its answers awaited."""

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.sampling = dict(ENV_SAMPLING)
        self.run_id: str | None = None  # the episode's run, once it is stored
        self.to_env: queue.SimpleQueue[Message] = queue.SimpleQueue()  # (C queues: a handoff costs no Python-level locking)
        self.to_model: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.ticks: list[Any] = []  # the tick records committed since the environment last took them

    def tick(self, record: Any) -> None:
        """A committed tick (model thread): kept for the environment, which takes it with the next message."""
        self.ticks.append(record)

    def take_ticks(self) -> list[Any]:
        """The tick records committed since the last call (environment thread, while the model thread waits or has
        ended: never both at once)."""
        out, self.ticks = self.ticks, []
        return out

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        self.to_env.put(("decide", list(requests), list(messages)))
        got = self.to_model.get()
        if got is _CLOSE:
            raise EpisodeClosed("the environment was reset or closed before the episode ended")
        return got

    def send(self, answers: list[Answer]) -> None:
        """The actions of the pending batch, as answers (in the order of its requests)."""
        self.to_model.put(answers)

    def close(self) -> None:
        """Stop a model thread that waits for actions (its run is stored as failed)."""
        self.to_model.put(_CLOSE)
