"""The `llm` backend: each request rendered into a prompt, one LLM call per batch, every call logged.

`LLMBackend` knows nothing of a cache: it renders, asks its LLM for the whole batch and turns the
answers into decisions (an answer with an error becomes the request's default, `fallback=True`)
and call records for the store. The cache and replay are a layer around it
(`agents.llm.cache.CachedBackend`), which asks it only for the calls the cache cannot answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Optional

from agents.llm.base import LLM, Answer, Messages
from agents.llm.keys import cache_key
from agents.llm.prompts import Template, builtin_template, reasoned, render_messages
from sim.contracts.backend import Backend, CallRecord
from sim.core.contracts import Decision, DecisionRequest
from sim.core.spec import RunSpec


class LLMBackend(Backend):
    """The `llm` policy over any LLM, without a cache. The LLM is created on first use (`llm_factory`), so a
    run answered wholly by a cache around this backend never loads a model."""

    name = "llm"
    #: whether the LLM is a server this process waits on (a LangChain chat model): the broker sends such backends'
    #: batches at once (sim.tick.broker), where a local model's would only compete for the same cores
    concurrent = False

    def __init__(self, model_id: str, sampling: dict[str, Any], *, llm: Optional[LLM] = None,
                 llm_factory: Optional[Callable[[], LLM]] = None, prompt: Optional[Template] = None,
                 name: str = "llm", served: bool = False) -> None:
        if llm is None and llm_factory is None:
            raise ValueError("LLMBackend needs an llm or an llm_factory")
        self.name = name  # `llm`, or `llm:K` for a population group's model of its own (sim.tick.models)
        self.concurrent = served
        self._llm = llm
        self._factory = llm_factory
        self.model_id = model_id
        self.sampling = dict(sampling)
        self.pending: list[CallRecord] = []
        self.llm_batches = 0  # batches sent to the LLM
        self.prompt = prompt  # a PromptTemplate or function (agents.llm.prompts); None: the built-in one
        self._builtin = prompt is None  # the built-in template follows the bound run's decision profile

    @property
    def llm(self) -> LLM:
        """The LLM, created on first use."""
        if self._llm is None:
            self._llm = self._factory()
        return self._llm

    def bind(self, run_id: str, spec: RunSpec) -> None:
        """Start a run: a backend made without a template renders with the built-in one of the run's decision
        profile (a run stored under an older contract replays with the prompts, so the cache keys, it was made with)."""
        self.pending.clear()
        if self._builtin:
            self.prompt = builtin_template(spec.profile)

    def drain_calls(self) -> list[CallRecord]:
        """The calls logged since the last tick, for the store to commit with it."""
        out, self.pending = self.pending, []
        return out

    def render(self, requests: Sequence[DecisionRequest]) -> list[Messages]:
        """Each request's prompt as chat messages."""
        return [render_messages(r, self.prompt) for r in requests]

    def keys(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[str]:
        """Each call's cache key: (model, prompt, space, sampling, request seed)."""
        return [cache_key(self.model_id, m, r.space, self.sampling, r.seed, r.reason_tokens if reasoned(r) else 0) for r, m in zip(requests, messages)]

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages],
               keys: Sequence[str]) -> list[tuple[Decision, CallRecord]]:
        """Ask the LLM for the whole batch (one call); each request's decision and call record, in order."""
        if not requests:
            return []
        started = time.perf_counter()
        got = self.llm.answer(requests, messages)
        latency = (time.perf_counter() - started) / max(1, len(requests))
        self.llm_batches += 1
        out = []
        for request, m, key, a in zip(requests, messages, keys, got):
            fallback = a.error is not None
            value = request.default if fallback else a.value
            call = self.call_record(request, m, key, value=value, answer=a.raw, tokens_in=a.tokens_in,
                                    tokens_out=a.tokens_out, latency_s=latency, cache_hit=False, fallback=fallback,
                                    attempts=a.attempts, completion_ids=a.completion_ids, logprobs=a.logprobs)
            out.append((Decision(agent_id=request.agent_id, phase=request.phase, value=value, backend=self.name,
                                 fallback=fallback, reason=a.error, attempts=a.attempts, cached=False, raw=a.raw), call))
        return out

    def call_record(self, request: DecisionRequest, messages: Messages, key: str, **call: Any) -> CallRecord:
        """The store's llm_calls row for one call (or cache hit) of this backend."""
        return dict(key=key, tick=request.tick, agent_id=request.agent_id, phase=request.phase, backend=self.name,
                    model_id=self.model_id, prompt=prompt_text(messages), **call)

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        messages = self.render(requests)
        answered = self.answer(requests, messages, self.keys(requests, messages))
        self.pending.extend(call for _, call in answered)
        return [decision for decision, _ in answered]


def prompt_text(messages: Sequence[dict[str, str]]) -> str:
    """Chat messages as the one text the store keeps: `[role] content` lines."""
    return "\n".join(f"[{m['role']}] {m['content']}" for m in messages)


ROLES = ("system", "user", "assistant")


def parse_prompt_text(text: str) -> list[dict[str, str]]:
    """The chat messages back from `prompt_text` (a line that starts `[system] `, `[user] ` or `[assistant] ` begins a
    message; any other line continues the one before). Text an agent or a data file wrote enters prompts quoted on one
    line (sim.core.text.quote), so it never starts a line of its own."""
    messages: list[dict[str, str]] = []
    for line in text.split("\n"):
        role = next((r for r in ROLES if line.startswith(f"[{r}] ") or line == f"[{r}]"), None)
        if role is not None:
            messages.append({"role": role, "content": line[len(role) + 3:]})
        elif messages:
            messages[-1]["content"] += "\n" + line
        else:
            messages.append({"role": "user", "content": line})
    return messages


__all__ = ["LLMBackend", "Answer", "prompt_text", "parse_prompt_text"]
