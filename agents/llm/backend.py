"""The LLM backend: prompts, cache, one engine call per batch, fallbacks recorded.

`LLMBackend.decide_batch` renders every request, looks all cache keys up in the store at
once, sends only the misses to the engine in one batch, and logs every call (hit or miss)
for the store to commit with the tick. With `cache_only` (replay) a miss is an error and
no model is ever loaded.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional, Protocol

from agents.llm.cache import cache_key
from agents.llm.prompts import builtin_template, render_messages
from sim.contracts import CONTRACT, Decision, DecisionRequest


@dataclass
class Answer:
    """An engine's answer to one request; `error` set means the default is used (fallback)."""

    value: Any
    raw: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    attempts: int = 1
    error: Optional[str] = None


class Engine(Protocol):
    """What actually runs a model: the embedded local LM or any LangChain chat model."""

    model_id: str
    sampling: dict[str, Any]

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[list[dict[str, str]]]) -> list[Answer]:
        """Answer a batch; raise BackendUnavailable when the model cannot be reached at all."""
        ...


class CacheMiss(RuntimeError):
    """A cache-only backend (replay) met a call that is not in the cache."""


class LLMBackend:
    """The `llm` policy: any engine behind the cache and the decision contract."""

    name = "llm"

    def __init__(self, model_id: str, sampling: dict[str, Any], *, engine: Optional[Engine] = None,
                 engine_factory: Optional[Callable[[], Engine]] = None, store: Any = None, cache_only: bool = False,
                 prompt: Any = None) -> None:
        if engine is None and engine_factory is None:
            raise ValueError("LLMBackend needs an engine or an engine_factory")
        self._engine = engine
        self._factory = engine_factory
        self.model_id = model_id
        self.sampling = dict(sampling)
        self.store = store
        self.cache_only = cache_only
        self.pending: list[dict[str, Any]] = []
        self.engine_batches = 0
        self.prompt = prompt  # a PromptTemplate or function (agents.llm.prompts); None: the built-in one
        self._builtin = prompt is None  # the built-in template follows the bound run's decision contract

    @property
    def engine(self) -> Engine:
        """The engine, created on first use: a run served wholly from the cache never loads a model."""
        if self._engine is None:
            self._engine = self._factory()
        return self._engine

    def bind(self, run_id: str, spec: Any) -> None:
        """Start a run: a backend made without a template renders with the built-in one of the run's contract
        (a run stored under contract 3 replays with the prompts, so the cache keys, it was made with)."""
        self.pending.clear()
        if self._builtin:
            self.prompt = builtin_template(getattr(spec, "contract", CONTRACT))

    def drain_calls(self) -> list[dict[str, Any]]:
        """The calls logged since the last tick, for the store to commit with it."""
        out, self.pending = self.pending, []
        return out

    def keys(self, requests: Sequence[DecisionRequest]) -> tuple[list[list[dict[str, str]]], list[str]]:
        """Prompt messages and cache keys of a batch (the per-decision bookkeeping)."""
        messages = [render_messages(r, self.prompt) for r in requests]
        keys = [cache_key(self.model_id, m, r.space, self.sampling, r.seed) for r, m in zip(requests, messages)]
        return messages, keys

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        messages, keys = self.keys(requests)
        hits = self.store.cache_lookup(keys) if self.store is not None else {}
        misses = [i for i, k in enumerate(keys) if k not in hits]
        answers: dict[int, Answer] = {}
        latency = 0.0
        if misses:
            if self.cache_only:
                r = requests[misses[0]]
                raise CacheMiss(f"no cached answer for agent {r.agent_id} at tick {r.tick} ({r.phase}); "
                                f"{len(misses)} of {len(requests)} calls missing")
            started = time.perf_counter()
            got = self.engine.answer([requests[i] for i in misses], [messages[i] for i in misses])
            latency = (time.perf_counter() - started) / len(misses)
            self.engine_batches += 1
            answers = dict(zip(misses, got))
        decisions = []
        for i, (request, key) in enumerate(zip(requests, keys)):
            if i in answers:
                a = answers[i]
                fallback = a.error is not None
                value = request.default if fallback else a.value
                call = dict(value=value, answer=a.raw, tokens_in=a.tokens_in, tokens_out=a.tokens_out,
                            latency_s=latency, cache_hit=False, fallback=fallback, attempts=a.attempts)
                reason = a.error
            else:
                row = hits[key]
                value, fallback = row.value, row.fallback
                call = dict(value=value, answer=row.answer, tokens_in=row.tokens_in, tokens_out=row.tokens_out,
                            latency_s=0.0, cache_hit=True, fallback=fallback, attempts=row.attempts)
                reason = "cached fallback" if fallback else None
            self.pending.append(dict(key=key, tick=request.tick, agent_id=request.agent_id, phase=request.phase,
                                     backend=self.name, model_id=self.model_id, prompt=_prompt_text(messages[i]), **call))
            decisions.append(Decision(agent_id=request.agent_id, phase=request.phase, value=value, backend=self.name,
                                      fallback=fallback, reason=reason, attempts=call["attempts"],
                                      cached=call["cache_hit"], raw=call["answer"]))
        return decisions


def _prompt_text(messages: Sequence[dict[str, str]]) -> str:
    return "\n".join(f"[{m['role']}] {m['content']}" for m in messages)
