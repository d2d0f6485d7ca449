"""Typed, bounded agent memory: observations, messages, notes and relationships.

A window of recent items plus a running summary keeps prompts short however long a run
grows. Retrieval ranks items by recency and by word overlap with a query (relevance).
Everything here is plain data, so a snapshot can be stored with each tick.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any, Literal

Kind = Literal["observation", "message", "note"]
_WORD = re.compile(r"[a-z0-9]+")


@dataclass(frozen=True)
class MemoryItem:
    """One remembered thing: when, what kind, what, and from whom (messages)."""

    tick: int
    kind: Kind
    text: str
    source: int | None = None


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


class Memory:
    """Recent items in a window, older ones folded into a summary; per-peer trust in [-1, 1]."""

    def __init__(self, window: int = 8, summary_chars: int = 400) -> None:
        if window < 1:
            raise ValueError("memory window must be >= 1")
        self.window = window
        self.summary_chars = summary_chars
        self.items: deque[MemoryItem] = deque()
        self.summary = ""
        self.relationships: dict[int, float] = {}

    def add(self, tick: int, kind: Kind, text: str, source: int | None = None) -> None:
        """Remember an item; the oldest beyond the window is folded into the summary."""
        self.items.append(MemoryItem(tick, kind, text, source))
        while len(self.items) > self.window:
            old = self.items.popleft()
            self.summary = (self.summary + f" [t{old.tick}] {old.text}").strip()
            if len(self.summary) > self.summary_chars:
                self.summary = "..." + self.summary[-(self.summary_chars - 3):]

    def relate(self, peer: int, delta: float, decay: float = 0.9) -> float:
        """Update trust in `peer` by an exponential moving step, clipped to [-1, 1]."""
        value = decay * self.relationships.get(peer, 0.0) + delta
        value = max(-1.0, min(1.0, value))
        self.relationships[peer] = value
        return value

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

    def render(self, query: str = "", k: int = 4) -> str:
        """Memory as prompt text: summary, then the retrieved items."""
        lines = []
        if self.summary:
            lines.append(f"Earlier: {self.summary}")
        for item in self.retrieve(query, k):
            who = f" (from agent {item.source})" if item.source is not None else ""
            lines.append(f"- month {item.tick}{who}: {item.text}")
        return "\n".join(lines)

    def snapshot(self) -> dict[str, Any]:
        """Plain data for the store."""
        return {
            "items": [asdict(i) for i in self.items],
            "summary": self.summary,
            "relationships": {str(k): round(v, 4) for k, v in sorted(self.relationships.items())},
        }
