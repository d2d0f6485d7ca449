"""95% intervals of a metric's mean across runs that never leave the metric's bounds.

One definition for the study tables (`societas show --sweep`), the app's Compare page, the
examples and the validity probes (`societas probe`). A t interval (mean ± t·sd/√n) runs past a bounded metric's range on few seeds (a
survival rate of 0.80 ± 0.56; donor resources down to −120), so:

- **Wilson score interval** for a rate whose every value is 0 or 1 (`collapsed`, `survival_rate`:
  a rate over runs), from `scipy.stats.binomtest(k, n).proportion_ci(method="wilson")`: always
  inside [0, 1]. Which metrics are rates is said by the caller (`rate=`) or, by default, by the
  name (`is_rate`): a count that happens to be 0 or 1 in every run (one opinion cluster) is not one.
- **Percentile bootstrap of the mean** otherwise (`scipy.stats.bootstrap`, 9,999 resamples, a
  fixed seed so the same runs give the same interval): a resampled mean lies between the
  smallest and the largest value, so the interval stays inside the values' own range and so
  inside any bound the metric has.

- **Newcombe's paired interval** for the difference of two rates measured on the same units (a
  validity probe's 0/1 response at its last level minus its first, paired by seed): Newcombe (1998),
  method 10, built from the two Wilson intervals and the pairs' correlation. Ten 0s at both levels
  give [-0.28, 0.28], not [0, 0]: ten unanswered questions cannot say the difference is exactly 0.

With one value there is no interval; constant values give a zero-width one (not for rates). On few runs the
percentile bootstrap is too narrow (with 3 runs its interval is at most their range, which holds
the mean 75% of the time): read intervals over fewer than 10 runs as rough.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np
from scipy import stats

#: the confidence level of every interval the platform prints or draws
CONFIDENCE = 0.95
#: bootstrap resamples (scipy's default), and the seed that makes an interval a function of its values
RESAMPLES = 9_999
SEED = 20_241_124


def finite(values: Iterable[Any]) -> np.ndarray:
    """The values that are finite numbers (None, NaN, text and infinities dropped), as floats."""
    out = []
    for v in values:
        if isinstance(v, bool):
            v = float(v)
        if isinstance(v, (int, float, np.integer, np.floating)) and math.isfinite(float(v)):
            out.append(float(v))
    return np.asarray(out, dtype=float)


#: final metrics that are rates over runs when each run's value is 0 or 1
RATE_NAMES = frozenset({"collapsed", "survived", "responds"})


def is_rate(metric: str) -> bool:
    """Whether a metric named so is a rate (0..1): `collapsed`, `*_rate`, `*.responds`, ... (not counts)."""
    name = metric.rsplit(".", 1)[-1]
    return name in RATE_NAMES or name.endswith("_rate")


def mean_interval(values: Iterable[Any], confidence: float = CONFIDENCE, *, rate: bool = False) -> dict[str, Any]:
    """{"n", "mean", "lo", "hi", "sd", "method"} of the finite values.

    `method` is "wilson" (`rate` and all values 0/1), "bootstrap", "constant" (all equal), "single" (one
    value: lo = hi = None) or None (no value: every figure None).
    """
    xs = finite(values)
    n = int(xs.size)
    if n == 0:
        return {"n": 0, "mean": None, "lo": None, "hi": None, "sd": None, "method": None}
    mean = float(xs.mean())
    sd = float(xs.std(ddof=1)) if n > 1 else 0.0
    if n == 1:
        return {"n": 1, "mean": mean, "lo": None, "hi": None, "sd": sd, "method": "single"}
    binary = bool(rate) and bool(np.all((xs == 0) | (xs == 1)))
    if np.all(xs == xs[0]) and not binary:
        return {"n": n, "mean": mean, "lo": mean, "hi": mean, "sd": 0.0, "method": "constant"}
    if binary:
        ci = stats.binomtest(int(xs.sum()), n).proportion_ci(confidence_level=confidence, method="wilson")
        return {"n": n, "mean": mean, "lo": float(ci.low), "hi": float(ci.high), "sd": sd, "method": "wilson"}
    res = stats.bootstrap((xs,), np.mean, confidence_level=confidence, n_resamples=RESAMPLES, method="percentile",
                          vectorized=True, batch=max(1, 2_000_000 // n), random_state=np.random.default_rng(SEED))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    # the resampled means lie within [min, max]; clip the last ulp of rounding so the promise holds exactly
    lo, hi = max(lo, float(xs.min())), min(hi, float(xs.max()))
    return {"n": n, "mean": mean, "lo": min(lo, mean), "hi": max(hi, mean), "sd": sd, "method": "bootstrap"}


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a rate of `successes` in `n` (n >= 1): always inside [0, 1], never zero-width."""
    ci = stats.binomtest(int(successes), int(n)).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)


def paired_rate_difference(first: Iterable[Any], last: Iterable[Any], confidence: float = CONFIDENCE) -> dict[str, Any]:
    """{"n", "mean", "lo", "hi", "sd", "method"} of mean(last) - mean(first) for 0/1 outcomes paired by position.

    Newcombe (1998, "Improved confidence intervals for the difference between binomial proportions based on
    paired data", method 10): the Wilson limits of each rate combined with the phi correlation of the pairs
    (0 where a margin is empty; a positive one less n/2, Newcombe's correction). Pairs with a value that is not 0 or 1 are a caller's error (ValueError).
    """
    pairs = [(float(a), float(b)) for a, b in zip(first, last)]
    if any(v not in (0.0, 1.0) for p in pairs for v in p):
        raise ValueError("paired_rate_difference takes 0/1 outcomes")
    n = len(pairs)
    if n == 0:
        return {"n": 0, "mean": None, "lo": None, "hi": None, "sd": None, "method": None}
    both = sum(a == 1 and b == 1 for a, b in pairs)
    only_first = sum(a == 1 and b == 0 for a, b in pairs)
    only_last = sum(a == 0 and b == 1 for a, b in pairs)
    neither = n - both - only_first - only_last
    p1, p2 = (both + only_first) / n, (both + only_last) / n
    diffs = np.array([b - a for a, b in pairs])
    sd = float(diffs.std(ddof=1)) if n > 1 else 0.0
    l1, u1 = wilson(both + only_first, n, confidence)
    l2, u2 = wilson(both + only_last, n, confidence)
    margins = (both + only_first) * (only_last + neither) * (both + only_last) * (only_first + neither)
    cross = both * neither - only_first * only_last
    # Newcombe's corrected phi (as Altman et al., "Statistics with confidence", 2000, work it): a positive
    # association is shrunk by n/2, so that pairs that all agree do not make the interval zero-width
    cross = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
    phi = cross / math.sqrt(margins) if margins else 0.0
    # Newcombe's limits for p2 - p1 (his theta is p1 - p2: the roles of the two rates are swapped)
    below = math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    above = math.sqrt(max(0.0, (u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2))
    mean = p2 - p1
    return {"n": n, "mean": mean, "lo": max(-1.0, mean - below), "hi": min(1.0, mean + above), "sd": sd,
            "method": "newcombe"}
