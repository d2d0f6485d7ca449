"""Typed, bounded agent memory: observations, messages, notes and relationships.

A window of recent items plus a running summary keeps prompts short however long a run
grows. Retrieval ranks items by recency and by word overlap with a query (relevance).
Everything here is plain data, so a snapshot can be stored with each tick.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, ClassVar, Literal

Kind = Literal["observation", "message", "note"]
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class MemoryItem:
    """One remembered thing: when, what kind, what, and from whom (messages)."""

    tick: int
    kind: Kind
    text: str
    source: int | None = None


@lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    """The words of `text` that retrieval matches on (kept per text: a remembered item is scored at every retrieval)."""
    return frozenset(w for w in _WORD.findall(text.lower()) if len(w) > 2)


class Memory:
    """Recent items in a window, older ones folded into a summary; per-peer trust in [-1, 1]."""

    #: trust below this magnitude has decayed out and is forgotten
    FORGET_BELOW = 0.01
    #: how many times any memory's `version` was set in this process: while it stands still no memory changed, and a
    #: tick's records need not look for one (sim.tick.recording)
    changes: ClassVar[int] = 0

    def __init__(self, window: int = 8, summary_chars: int = 400, max_peers: int = 16) -> None:
        if window < 1:
            raise ValueError("memory window must be >= 1")
        self.window = window
        self.summary_chars = summary_chars
        self.max_peers = max_peers
        self.items: deque[MemoryItem] = deque()
        self.summary = ""
        self.relationships: dict[int, float] = {}
        #: bumped on every change, so a snapshot is stored only when something changed
        self.version = 0

    @property
    def version(self) -> int:
        """The memory's change count: set on every change (by `add`, `relate`, or a subclass), which counts in `changes`."""
        return self._version

    @version.setter
    def version(self, value: int) -> None:
        self._version = value
        Memory.changes += 1

    def add(self, tick: int, kind: Kind, text: str, source: int | None = None) -> None:
        """Remember an item; the oldest beyond the window is folded into the summary."""
        self.items.append(MemoryItem(tick, kind, text, source))
        self.version += 1
        while len(self.items) > self.window:
            old = self.items.popleft()
            self.summary = (self.summary + f" [t{old.tick}] {old.text}").strip()
            if len(self.summary) > self.summary_chars:  # keep its end; 0 (or too small for "..."): no summary
                keep = self.summary_chars - 3
                self.summary = "..." + self.summary[-keep:] if keep > 0 else ""

    def relate(self, peer: int, delta: float, decay: float = 0.9) -> float:
        """Update trust in `peer` by an exponential moving step, clipped to [-1, 1].

        Bounded: at most `max_peers` peers are kept; beyond that the weakest tie (smallest
        |trust|) is dropped, and a tie that decays under `FORGET_BELOW` is forgotten.
        """
        value = decay * self.relationships.get(peer, 0.0) + delta
        value = max(-1.0, min(1.0, value))
        self.version += 1
        if abs(value) < self.FORGET_BELOW:
            self.relationships.pop(peer, None)
            return 0.0
        self.relationships[peer] = value
        if len(self.relationships) > self.max_peers:
            weakest = min(self.relationships, key=lambda k: (abs(self.relationships[k]), k))
            del self.relationships[weakest]
        return value

    def __bool__(self) -> bool:
        return bool(self.items or self.summary or self.relationships)

    def retrieve(self, query: str = "", k: int = 4) -> list[MemoryItem]:
        """The k items scoring highest on recency plus relevance to `query`, oldest first."""
        if not self.items:
            return []
        q = _words(query)
        latest = self.items[-1].tick
        scored = []
        for idx, item in enumerate(self.items):
            recency = 1.0 / (1.0 + latest - item.tick)
            relevance = len(q & _words(item.text)) / len(q) if q else 0.0
            scored.append((recency + relevance, idx, item))
        best = sorted(scored, key=lambda s: (-s[0], -s[1]))[:k]
        return [item for _, _, item in sorted(best, key=lambda s: s[1])]

    def render(self, query: str = "", k: int = 4, noun: str = "month") -> str:
        """Memory as prompt text: summary, then the retrieved items, each dated by `noun` and its tick."""
        lines = []
        if self.summary:
            lines.append(f"Earlier: {self.summary}")
        for item in self.retrieve(query, k):
            who = f" (from agent {item.source})" if item.source is not None else ""
            lines.append(f"- {noun} {item.tick}{who}: {item.text}")
        return "\n".join(lines)

    def snapshot(self) -> dict[str, Any]:
        """Plain data for the store ({} for an empty memory)."""
        if not self:
            return {}
        return {
            # MemoryItem's fields by name: asdict's recursive copy costs several times this, every tick of every LLM agent
            "items": [{"tick": i.tick, "kind": i.kind, "text": i.text, "source": i.source} for i in self.items],
            "summary": self.summary,
            "relationships": {str(k): round(v, 4) for k, v in sorted(self.relationships.items())},
        }
