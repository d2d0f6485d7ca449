"""Bounded-confidence opinion dynamics, vectorised with numpy (opinions in [0, 1]).

- Deffuant-Weisbuch (Deffuant et al. 2000): when two opinions are within `eps`, both move
  toward each other by a fraction `mu` of their difference. `deffuant_pairs` is the classic
  symmetric model for a batch of disjoint pairs; `deffuant_read` is its one-sided form for
  content: a reader moves toward the stance of an item it read, the author is not moved.
- Hegselmann-Krause (2002): an agent moves to the mean of all opinions within `eps` of its
  own (its own included). `hk_complete` is the classic synchronous update on complete
  mixing in O(N log N) (sorted prefix sums); `hk_read` averages over the items a reader saw,
  moving a fraction `mu` of the way (mu = 1 is classic HK).

Known results these reproduce on complete mixing from uniform opinions (tests/test_social.py):
consensus for large eps, about 1/(2 eps) clusters for small eps, and for Deffuant mu changing
the speed of convergence but not the number of clusters.
"""

from __future__ import annotations

import numpy as np


def deffuant_pairs(x: np.ndarray, i: np.ndarray, j: np.ndarray, eps: float, mu: float) -> np.ndarray:
    """One round of symmetric Deffuant updates on disjoint pairs (i[k], j[k]); returns a new array."""
    out = np.array(x, dtype=float, copy=True)
    d = out[j] - out[i]
    close = np.abs(d) < eps
    step = mu * d * close
    out[i] += step
    out[j] -= step
    return out


def random_matching(n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """A uniformly random set of floor(n/2) disjoint pairs (complete mixing)."""
    perm = rng.permutation(n)
    half = n // 2
    return perm[:half], perm[half:2 * half]


def deffuant_read(x: np.ndarray, readers: np.ndarray, stances: np.ndarray, eps: float, mu: float) -> np.ndarray:
    """Readers (distinct indices) move toward the stance each read, when within eps; returns a new array.

    `stances` holds one stance per reader, NaN for a reader who read nothing.
    """
    out = np.array(x, dtype=float, copy=True)
    s = np.asarray(stances, dtype=float)
    d = np.where(np.isnan(s), 0.0, s - out[readers])
    out[readers] += mu * d * (np.abs(d) < eps)
    return out


def hk_read(x: np.ndarray, readers: np.ndarray, stances: np.ndarray, eps: float, mu: float = 1.0) -> np.ndarray:
    """Readers move `mu` of the way to the mean of their own opinion and the stances within eps they saw.

    `stances` is readers x slots with NaN for empty slots. Returns a new array.
    """
    out = np.array(x, dtype=float, copy=True)
    own = out[readers]
    s = np.asarray(stances, dtype=float)
    close = ~np.isnan(s) & (np.abs(s - own[:, None]) <= eps)
    total = own + np.where(close, s, 0.0).sum(axis=1)
    mean = total / (1 + close.sum(axis=1))
    out[readers] = own + mu * (mean - own)
    return out


def hk_complete(x: np.ndarray, eps: float) -> np.ndarray:
    """One synchronous Hegselmann-Krause step on complete mixing (everyone hears everyone)."""
    x = np.asarray(x, dtype=float)
    xs = np.sort(x)
    csum = np.concatenate([[0.0], np.cumsum(xs)])
    lo = np.searchsorted(xs, x - eps, side="left")
    hi = np.searchsorted(xs, x + eps, side="right")
    return (csum[hi] - csum[lo]) / (hi - lo)
