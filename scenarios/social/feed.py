"""Feed ranking: every active agent's feed in one vectorised pass per block of readers.

Candidates are the items (posts and comments) of the last `feed_window` ticks, at most
`max_candidates` of the newest, so a tick costs O(readers x candidates), never O(agents^2).
Scores per recommender (higher first; a reader never sees its own items):
- `chronological`: items by authors the reader follows first, each group newest first;
- `hot`: Reddit's hot rank, sign(s) log10(max(|s|, 1)) + tick / hot_decay with s = up - down
  votes (hot_decay ticks weigh as much as a tenfold score);
- `personalized`: interest of the reader in the item's forum (normalised to its top
  interest) + 1 if the reader follows the author + 0.5 * 2^-(age in ticks) for recency;
- `random`: uniform random order (a seeded generator).
The top `feed_size` are taken with argpartition and sorted by score.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RECOMMENDERS = ("chronological", "hot", "personalized", "random")
BLOCK = 1024  # readers scored at once: the score matrix is BLOCK x candidates


@dataclass(frozen=True)
class Pool:
    """The candidate items of this tick (parallel arrays, one entry per item)."""

    ids: np.ndarray
    author: np.ndarray
    tick: np.ndarray
    topic: np.ndarray
    score: np.ndarray

    def __len__(self) -> int:
        return int(self.ids.size)


def follow_matrix(indptr: np.ndarray, followees: np.ndarray, authors: np.ndarray) -> np.ndarray:
    """Boolean readers x candidates: does reader r (row r of the CSR indptr/followees) follow the item's author."""
    a = indptr.size - 1
    out = np.zeros((a, authors.size), dtype=bool)
    if followees.size == 0 or authors.size == 0:
        return out
    order = np.argsort(authors, kind="stable")
    sorted_authors = authors[order]
    rows = np.repeat(np.arange(a), np.diff(indptr))
    lo = np.searchsorted(sorted_authors, followees, side="left")
    cnt = np.searchsorted(sorted_authors, followees, side="right") - lo
    total = int(cnt.sum())
    if total == 0:
        return out
    starts = np.concatenate([[0], np.cumsum(cnt)[:-1]])
    pos = np.repeat(lo - starts, cnt) + np.arange(total)
    out[np.repeat(rows, cnt), order[pos]] = True
    return out


def hot_rank(pool: Pool, hot_decay: float) -> np.ndarray:
    """Reddit's hot rank of each candidate (the same for every reader)."""
    sc = pool.score.astype(float)
    return np.sign(sc) * np.log10(np.maximum(np.abs(sc), 1.0)) + pool.tick / hot_decay + pool.ids * 1e-12


def subset(pool: Pool, keep: np.ndarray) -> Pool:
    """The candidates at positions `keep`."""
    return Pool(pool.ids[keep], pool.author[keep], pool.tick[keep], pool.topic[keep], pool.score[keep])


def scores(recommender: str, readers: np.ndarray, pool: Pool, follows: np.ndarray, interests: np.ndarray,
           now: int, hot_decay: float, rng: np.random.Generator) -> np.ndarray:
    """Readers x candidates score matrix (own items at -inf)."""
    a, c = readers.size, len(pool)
    if recommender == "chronological":
        s = pool.ids.astype(float)[None, :] + follows * 1e12
    elif recommender == "hot":
        s = np.broadcast_to(hot_rank(pool, hot_decay), (a, c)).copy()
    elif recommender == "personalized":
        mine = interests[readers]
        s = mine[:, pool.topic] / np.maximum(mine.max(axis=1, keepdims=True), 1e-12)
        s += follows + 0.5 * np.exp2(-(now - pool.tick).astype(float))[None, :] + pool.ids * 1e-12
    elif recommender == "random":
        s = rng.random((a, c))
    else:
        raise ValueError(f"unknown recommender {recommender!r}; valid: {', '.join(RECOMMENDERS)}")
    s[pool.author[None, :] == readers[:, None]] = -np.inf
    return s


def top_k(s: np.ndarray, k: int) -> np.ndarray:
    """Per row, the column indices of the k highest finite scores, best first; -1 pads short rows."""
    a, c = s.shape
    if c == 0 or k == 0:
        return np.full((a, k), -1, dtype=np.int64)
    kk = min(k, c)
    part = np.argpartition(-s, kk - 1, axis=1)[:, :kk] if kk < c else np.tile(np.arange(c), (a, 1))
    vals = np.take_along_axis(s, part, axis=1)
    order = np.argsort(-vals, axis=1, kind="stable")
    best = np.take_along_axis(part, order, axis=1)
    best[~np.isfinite(np.take_along_axis(vals, order, axis=1))] = -1
    if kk < k:
        best = np.concatenate([best, np.full((a, k - kk), -1, dtype=np.int64)], axis=1)
    return best


def rank_feeds(recommender: str, readers: np.ndarray, indptr: np.ndarray, followees: np.ndarray, pool: Pool,
               interests: np.ndarray, feed_size: int, now: int, hot_decay: float,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each reader's feed as positions into `pool` (readers x feed_size, -1 padded), and the follow flags of those slots.

    `hot` ranks the same for everyone but a reader's own items, so only the global top
    feed_size + (most items of one author) can reach any feed: the rest is dropped first (exact).
    """
    if recommender == "hot" and len(pool):
        margin = int(np.bincount(pool.author).max())
        if len(pool) > feed_size + margin:
            keep = np.sort(np.argpartition(-hot_rank(pool, hot_decay), feed_size + margin - 1)[: feed_size + margin])
            slots, followed = rank_feeds(recommender, readers, indptr, followees, subset(pool, keep), interests,
                                         feed_size, now, hot_decay, rng)
            return np.where(slots >= 0, keep[np.maximum(slots, 0)], -1), followed
    feeds = np.full((readers.size, feed_size), -1, dtype=np.int64)
    followed = np.zeros((readers.size, feed_size), dtype=bool)
    for start in range(0, readers.size, BLOCK):
        stop = min(start + BLOCK, readers.size)
        sub = indptr[start:stop + 1] - indptr[start]
        fol = follow_matrix(sub, followees[indptr[start]:indptr[stop]], pool.author)
        s = scores(recommender, readers[start:stop], pool, fol, interests, now, hot_decay, rng)
        best = top_k(s, feed_size)
        feeds[start:stop] = best
        followed[start:stop] = np.take_along_axis(fol, np.maximum(best, 0), axis=1) & (best >= 0) if len(pool) else False
    return feeds, followed
