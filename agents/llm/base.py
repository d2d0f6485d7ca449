"""What an LLM is to the `llm` backend: anything that answers a batch of rendered prompts (`LLM`).

The embedded local model (`agents.llm.local.llm.LocalLLM`), any LangChain chat model
(`agents.llm.chat.ChatLLM`) and the Ray actor's proxy (`agents.llm.shared.ModelProxy`) are LLMs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from sim.core.contracts import DecisionRequest

#: a prompt as chat messages: [{"role": "system" | "user" | "assistant", "content": text}, ...]
Messages = list[dict[str, str]]


@dataclass
class Answer:
    """An LLM's answer to one request; `error` set means the request's default is used (a fallback)."""

    value: Any
    raw: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    attempts: int = 1
    error: Optional[str] = None
    #: the completion as the model's tokens and each one's log-probability (a local model gives them; None otherwise);
    #: a log-probability may be None for a token the model did not sample (text re-encoded after a reasoning cut)
    completion_ids: Optional[list[int]] = None
    logprobs: Optional[list[Optional[float]]] = None


class LLM(Protocol):
    """Answers a batch: one `Answer` per request, in order. `model_id` and `sampling` name the model and
    how it samples (both enter every cache key)."""

    model_id: str
    sampling: dict[str, Any]

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        """Answer a batch; raise `sim.contracts.backend.BackendUnavailable` when the model cannot be reached at all."""
        ...
