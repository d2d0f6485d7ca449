"""The LLM cache as a layer around the `llm` backend: every call answered from the store when it can be.

`CachedBackend(backend, cache)` renders a batch with the backend's prompts, looks every cache key
up at once, asks the backend (so its LLM) only for the misses, and logs every call, hit or miss,
for the store to commit with the tick. A rerun of a spec is served wholly from the cache, so it
never loads a model.

With a `ReplayMode` that is active (replay, and a resume or fork while it redoes the committed
ticks) a miss is an error (`CacheMiss`): a replayed decision can never silently differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from agents.llm.backend import LLMBackend
from sim.contracts.backend import Backend, CallCache, CallRecord, ReplayMode
from sim.core.contracts import Decision, DecisionRequest
from sim.core.spec import RunSpec


class CacheMiss(RuntimeError):
    """A replay met an LLM call that is not in the cache."""


class CachedBackend(Backend):
    """`backend` behind the cache `cache` (the store); `replay`, while active, allows no call to reach the model.
    `lookup=False`: every call is logged for the store but none is looked up, for a backend whose model id no stored
    call can have (the environment's live episode: its id is new), so that each decision costs no query."""

    def __init__(self, backend: LLMBackend, cache: CallCache, replay: Optional[ReplayMode] = None, *,
                 lookup: bool = True) -> None:
        self.backend = backend
        self.cache = cache
        self.replay = replay
        self.lookup = lookup
        self.name = backend.name
        self.concurrent = backend.concurrent
        self.pending: list[CallRecord] = []

    def bind(self, run_id: str, spec: RunSpec) -> None:
        self.pending.clear()
        self.backend.bind(run_id, spec)

    def drain_calls(self) -> list[CallRecord]:
        out, self.pending = self.pending, []
        return out

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        backend = self.backend
        messages = backend.render(requests)
        keys = backend.keys(requests, messages)
        hits = self.cache.cache_lookup(keys) if self.lookup else {}
        misses = [i for i, k in enumerate(keys) if k not in hits]
        if misses and self.replay is not None and self.replay.active:
            r = requests[misses[0]]
            raise CacheMiss(f"no cached answer for agent {r.agent_id} at tick {r.tick} ({r.phase}); "
                            f"{len(misses)} of {len(requests)} calls missing")
        answered = dict(zip(misses, backend.answer([requests[i] for i in misses], [messages[i] for i in misses],
                                                   [keys[i] for i in misses])))
        decisions = []
        for i, (request, key) in enumerate(zip(requests, keys)):
            if i in answered:
                decision, call = answered[i]
            else:
                row = hits[key]
                call = backend.call_record(request, messages[i], key, value=row.value, answer=row.answer,
                                           tokens_in=row.tokens_in, tokens_out=row.tokens_out, latency_s=0.0,
                                           cache_hit=True, fallback=row.fallback, attempts=row.attempts,
                                           completion_ids=row.completion_ids, logprobs=row.logprobs)
                decision = Decision(agent_id=request.agent_id, phase=request.phase, value=row.value, backend=self.name,
                                    fallback=row.fallback, reason="cached fallback" if row.fallback else None,
                                    attempts=row.attempts, cached=True, raw=row.answer)
            self.pending.append(call)
            decisions.append(decision)
        return decisions
