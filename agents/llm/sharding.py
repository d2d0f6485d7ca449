"""How one batch of LLM requests is split over several answerers (engine replicas, served endpoints).

Pure Python over the prompts' text, no Ray, no threads, so it is tested and reasoned about on its own:

- `shards`: the prompts grouped by shared prefix as the engine groups them (its layout, over the prompts'
  characters), each group chunked to the row cap, and small groups packed together up to the cap (a social
  tick has many small prefix groups: one call of 16 rows costs far less than eight calls of 2, the prefix
  they all share forwarded once and every decoding step shared). A function of the prompts alone, so the
  same batch makes the same shards whatever the number of answerers.
- `assign`: a first plan, each shard's answerer, a prefix group's shards kept together where the balance
  allows (a server's prefix cache sees its group's requests together).
- `Dispatch`: which shard an answerer that just became free takes next: its own planned shards in order,
  then the last pending shard of the answerer with the most planned work left, so that one finishing early
  helps one that is slow (shards' costs are estimates: a Text request's decoding is not in them).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Optional

from agents.llm.base import Messages
from agents.llm.local.layout import LayoutRules, layout


def prompt_key(messages: Messages) -> list[int]:
    """A prompt as the code points of its messages (roles and contents), for grouping by shared prefix."""
    return [ord(c) for m in messages for c in f"\x00{m['role']}\x01{m['content']}"]


def shards(messages: Sequence[Messages], rules: LayoutRules) -> list[list[int]]:
    """The batch's request indices cut into shards of at most `rules.max_batch` requests, every index in order
    within its shard: prefix groups (the engine's layout) chunked to the cap, and the chunks smaller than the cap
    packed together in layout order (neighbours share the most text) until the next would pass it. A prefix group
    of n requests lies in ceil(n / cap) shards. A function of the prompts only."""
    cap = rules.max_batch
    out: list[list[int]] = []
    cur: list[int] = []
    for _, _, buckets in layout([prompt_key(m) for m in messages], rules):
        for bucket in buckets:
            if len(bucket) >= cap:  # a full chunk is a shard of its own; small ones keep filling `cur`
                out.append(sorted(bucket))
                continue
            if len(cur) + len(bucket) > cap:
                out.append(sorted(cur))
                cur = []
            cur.extend(bucket)
    if cur:
        out.append(sorted(cur))
    return out


def shard_cost(part: Sequence[int], messages: Sequence[Messages]) -> int:
    """A shard's estimated cost: its prompts' characters (as `prompt_key` counts them, without building the keys)."""
    return sum(len(m["role"]) + len(m["content"]) + 2 for i in part for m in messages[i])


def assign(parts: Sequence[Sequence[int]], messages: Sequence[Messages], answerers: int) -> list[int]:
    """The planned answerer of each shard: in shard order (a prefix group's shards are neighbours), each goes to the
    answerer the previous shard went to while its load stays within a fair share, else to the least loaded one."""
    cost = [shard_cost(part, messages) for part in parts]
    fair = sum(cost) / max(1, answerers)
    load = [0] * answerers
    out: list[int] = []
    for c in cost:
        last = out[-1] if out else None
        pick = last if last is not None and load[last] + c <= fair * 1.05 else min(range(answerers), key=lambda k: (load[k], k))
        load[pick] += c
        out.append(pick)
    return out


class Dispatch:
    """The shards not yet sent: `next(k)` is the shard answerer k (free now) takes: one given back (`again`) first,
    then the first of its own plan, else the last pending one of the answerer with the most pending cost (None when
    nothing is left; an answerer that is gone never asks, so the others take its plan). Which answerer answers a
    shard never changes its answers: the shards are the same calls whatever happens."""

    def __init__(self, plan: Sequence[int], cost: Sequence[int], answerers: int) -> None:
        self.queues: list[deque[int]] = [deque(i for i, k in enumerate(plan) if k == a) for a in range(answerers)]
        self.cost = list(cost)
        self.returned: deque[int] = deque()

    def next(self, answerer: int) -> Optional[int]:
        """The shard `answerer` answers next (taken off the pending ones), or None when none is pending."""
        if self.returned:
            return self.returned.popleft()
        own = self.queues[answerer]
        if own:
            return own.popleft()
        donor = max(range(len(self.queues)), key=lambda k: (sum(self.cost[i] for i in self.queues[k]), -k))
        return self.queues[donor].pop() if self.queues[donor] else None

    def again(self, shard: int) -> None:
        """A shard whose answerer failed it, pending again (the next free answerer takes it first)."""
        self.returned.append(shard)

    def pending(self) -> int:
        """How many shards are still to be sent."""
        return len(self.returned) + sum(len(q) for q in self.queues)
