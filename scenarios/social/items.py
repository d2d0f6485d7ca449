"""Every post and comment of a run as growable parallel numpy arrays (ids are 0, 1, 2, ... in time order)."""

from __future__ import annotations

import numpy as np

_FIELDS = {"author": np.int64, "tick": np.int64, "topic": np.int64, "stance": float, "up": np.int64,
           "down": np.int64, "parent": np.int64, "depth": np.int64, "replies": np.int64}


class Items:
    """Posts (depth 0, parent -1) and comments (depth = parent's depth + 1); texts in a list."""

    def __init__(self, capacity: int = 1024) -> None:
        self.n = 0
        self._cap = capacity
        for name, dtype in _FIELDS.items():
            setattr(self, name, np.zeros(capacity, dtype=dtype))
        self.text: list[str] = []

    def _grow(self) -> None:
        self._cap *= 2
        for name in _FIELDS:
            old = getattr(self, name)
            new = np.zeros(self._cap, dtype=old.dtype)
            new[: self.n] = old[: self.n]
            setattr(self, name, new)

    def add(self, author: int, tick: int, topic: int, stance: float, parent: int, text: str) -> int:
        """Append an item and return its id; a comment counts as a reply to its parent."""
        if self.n == self._cap:
            self._grow()
        i = self.n
        self.author[i], self.tick[i], self.topic[i], self.stance[i] = author, tick, topic, stance
        self.parent[i] = parent
        self.depth[i] = 0 if parent < 0 else self.depth[parent] + 1
        if parent >= 0:
            self.replies[parent] += 1
        self.text.append(text)
        self.n += 1
        return i

    def window(self, since_tick: int, limit: int) -> np.ndarray:
        """Ids of the items created at or after `since_tick`, at most the `limit` newest."""
        start = int(np.searchsorted(self.tick[: self.n], since_tick, side="left"))
        return np.arange(max(start, self.n - limit), self.n, dtype=np.int64)

    def comments(self) -> np.ndarray:
        """Boolean mask of the comments among all items."""
        return self.parent[: self.n] >= 0
