"""Several servers of one served model as one `LLM`: a tick's batch split across them by prompt prefix.

`EndpointsLLM` is what a run's backend uses when `llm.endpoints` lists the servers (vLLM, SGLang, llama.cpp,
Ollama: any OpenAI-compatible one). The batch is cut as the inference pool cuts it (`agents.llm.sharding`):
prefix groups kept whole where they fit, about `SHARDS_PER_ENDPOINT` shards a server, so that a group's requests
reach one server together and its prefix cache computes their shared beginning once. Each server answers one
shard at a time (its calls all in flight together, up to `llm.max_concurrency`: `ChatLLM`) and takes the next
when done: its own planned shards, then those of the server with the most left.

A served request's answer depends on its own prompt and seed only (one HTTP call each), so the answers are the
same whichever server answers and however the batch is cut: the shards may follow the number of servers. A
server that stops answering (every call of its shard failed) is left out for the rest of the batch and its shard
goes to the others; it is left out of the batches of the next `RETRY_DOWN_S` seconds too (each would otherwise wait
for its calls to fail again), unless the others fail as well; when none answers, the batch fails as a
single server's does (`BackendUnavailable`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Optional

from agents.llm.base import Answer, Messages
from agents.llm.chat import ChatLLM
from agents.llm.local.layout import LayoutRules
from agents.llm.sharding import Dispatch, assign, shard_cost, shards
from sim.contracts.backend import BackendUnavailable
from sim.core.contracts import DecisionRequest

#: shards a server takes in a batch, about: more than one, so that one finishing early takes some of a slow one's
SHARDS_PER_ENDPOINT = 2
#: seconds a server that did not answer is left out of later batches before it is tried again
RETRY_DOWN_S = 30.0


def served_rules(requests: int, servers: int) -> LayoutRules:
    """How a batch of `requests` is cut for `servers` servers: about `SHARDS_PER_ENDPOINT` shards a server (at least
    one request a shard); prefix groups over the prompts' characters as the local pool groups them."""
    cap = max(1, math.ceil(requests / (servers * SHARDS_PER_ENDPOINT)))
    return LayoutRules(batch_tokens=1 << 62, max_batch=cap, min_shared_prefix=64, split_cost=192)


class EndpointsLLM:
    """An `LLM` whose batches are answered by several servers, one `ChatLLM` each (`chats`, in `llm.endpoints`
    order)."""

    def __init__(self, chats: Sequence[ChatLLM]) -> None:
        self.chats = list(chats)
        self.threads = ThreadPoolExecutor(max_workers=len(self.chats), thread_name_prefix="societas-endpoint")
        self.answered = [0] * len(self.chats)  # requests each server answered (for reports and tests)
        self.down_until = [0.0] * len(self.chats)  # time.monotonic() until which a server that failed is left out

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        """The batch's shards answered by the servers, each taking the next as it finishes one; the answers back in
        request order. BackendUnavailable when no server answers."""
        if not requests:
            return []
        parts = shards(messages, served_rules(len(requests), len(self.chats)))
        plan = Dispatch(assign(parts, messages, len(self.chats)), [shard_cost(p, messages) for p in parts], len(self.chats))
        out: list[Optional[Answer]] = [None] * len(requests)
        running: dict[Future, tuple[int, int]] = {}
        idle: list[int] = []
        now = time.monotonic()
        resting = [k for k, until in enumerate(self.down_until) if until > now]
        if len(resting) == len(self.chats):  # every server failed lately: try them all again
            resting = []
        down: dict[int, str] = {k: "it did not answer a moment ago" for k in resting}

        def send(k: int) -> None:
            i = plan.next(k)
            if i is None:
                idle.append(k)
                return
            part = parts[i]
            running[self.threads.submit(self.chats[k].answer, [requests[j] for j in part], [messages[j] for j in part])] = (k, i)

        for k in range(len(self.chats)):
            if k not in down:
                send(k)
        while running:
            done, _ = wait(list(running), return_when=FIRST_COMPLETED)
            for future in done:
                k, i = running.pop(future)
                try:
                    got = future.result()
                except BackendUnavailable as exc:  # this server is down: its shard (and plan) go to the others
                    down[k] = str(exc)
                    self.down_until[k] = time.monotonic() + RETRY_DOWN_S
                    plan.again(i)
                    while idle and plan.pending():
                        send(idle.pop())
                    if len(down) == len(self.chats):
                        if not resting:
                            raise BackendUnavailable(f"no server answers: {down[k]}") from None
                        for r in resting:  # the others failed now: those left out are the batch's last chance
                            del down[r]
                            send(r)
                        resting = []
                    continue
                for j, a in zip(parts[i], got):
                    out[j] = a
                self.answered[k] += len(got)
                self.down_until[k] = 0.0
                send(k)
        return out  # type: ignore[return-value]
