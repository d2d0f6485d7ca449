"""The backend contract: what answers a batch of decision requests, and the optional hooks it may fill in.

Scripted strategies and LLMs answer through the same contract. A backend subclasses `Backend`
(a Protocol with default hooks) and implements `decide_batch`; the others have defaults that do
nothing, so the tick, the runner and the broker call them on every backend without asking
whether it has them:

- `decide_columns(batch)`: answer a whole `RequestBatch` in columns (None: "ask me request by request");
- `bind(run_id, spec)`: a run starts (e.g. pick the random stream or the prompt of the run's contract);
- `drain_calls()`: the calls made since the last tick (LLM prompts, answers, tokens) for the store.

`CallCache` is what the LLM cache needs from a store (the `Store` is one), and `ReplayMode` is the
switch with which a replay keeps LLM calls off the model until its committed ticks are redone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional, Protocol, runtime_checkable

from sim.core.contracts import Decision, DecisionColumns, DecisionRequest, RequestBatch
from sim.core.spec import RunSpec

#: one LLM call (or cache hit) as the store's `llm_calls` row takes it (without run_id)
CallRecord = dict[str, Any]


class BackendUnavailable(RuntimeError):
    """A backend could not answer any request of a batch (e.g. the server is unreachable)."""


@runtime_checkable
class Backend(Protocol):
    """Anything that answers a batch of decision requests, in order, one decision per request."""

    name: str
    #: whether its batches wait on a server rather than on this machine's cores (a served model): the broker sends the
    #: batches of every such backend of a phase at once, so several served models answer in parallel
    concurrent: bool = False

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """Answer every request, in order."""
        ...

    def decide_columns(self, batch: RequestBatch) -> Optional[DecisionColumns]:
        """Answer a RequestBatch whole, in columns; None (the default) means: ask `decide_batch` with its requests."""
        return None

    def bind(self, run_id: str, spec: RunSpec) -> None:
        """A run starts with this backend (called once, before its first tick)."""
        return None

    def drain_calls(self) -> list[CallRecord]:
        """The calls made since the last drain, for the store to commit with the tick (none by default)."""
        return []


def fallback_decision(request: DecisionRequest, backend: str, reason: str, attempts: int = 1,
                      raw: Optional[str] = None) -> Decision:
    """The request's default, marked as a fallback with its reason."""
    return Decision(agent_id=request.agent_id, phase=request.phase, value=request.default, backend=backend,
                    fallback=True, reason=reason, attempts=attempts, raw=raw)


class CachedCall(Protocol):
    """A stored LLM call the cache answers with (a row of the store's `llm_calls`)."""

    value: Any
    answer: str
    tokens_in: int
    tokens_out: int
    fallback: bool
    attempts: int
    completion_ids: Optional[list[int]]
    logprobs: Optional[list[Optional[float]]]


class CallCache(Protocol):
    """Where LLM answers are looked up by cache key (the store: every run's first-made calls)."""

    def cache_lookup(self, keys: Sequence[str]) -> Mapping[str, CachedCall]:
        """The stored original call for each key that has one."""
        ...


class ReplayMode:
    """Whether LLM answers must come from the cache (a replay of committed ticks) or may reach the model.

    A replay, resume or fork builds its LLM backend with an active ReplayMode and calls `finish()`
    once the committed ticks are redone; from then on, misses go to the model.
    """

    __slots__ = ("active",)

    def __init__(self, active: bool = True) -> None:
        self.active = active

    def finish(self) -> None:
        """The replayed part is over: calls may reach the model."""
        self.active = False
