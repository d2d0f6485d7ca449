"""How far one run's metrics are from another's: the divergence of an archetype run from the same run without
archetypes (agents.llm.archetypes), or of any two runs of one scenario.

Per metric m present with a finite number in both runs at a tick, the relative difference at tick t is
`|a_t - b_t| / max(|a_t|, |b_t|)` (0 where both are 0), a number in [0, 1]; the metric's divergence is its mean over
the ticks both runs have, and the runs' divergence is the mean over their metrics. It is 0 for identical series
and 1 when every value of one run is 0 where the other's is not (or of opposite sign). Pure functions of per-tick
metric dicts: no database.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any, Optional

#: final-summary keys that describe how decisions were made, not the world: never compared
NOT_COMPARED_PREFIX = "archetype_"


def _number(v: Any) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v) if math.isfinite(float(v)) else None


def relative_difference(a: float, b: float) -> float:
    """|a - b| / max(|a|, |b|), 0 when both are 0: in [0, 1]."""
    scale = max(abs(a), abs(b))
    return 0.0 if scale == 0 else min(1.0, abs(a - b) / scale)


def divergence(ticks_a: Mapping[int, Mapping[str, Any]], ticks_b: Mapping[int, Mapping[str, Any]],
               skip: Iterable[str] = ()) -> dict[str, Any]:
    """{"divergence": mean over metrics, "metrics": {name: mean relative difference over ticks}, "ticks": ticks
    compared} for two runs' per-tick metrics (tick -> {metric: value}); `skip`: metric names left out (a clock)."""
    skipped = set(skip)
    common = sorted(set(ticks_a) & set(ticks_b))
    per: dict[str, list[float]] = {}
    for t in common:
        a, b = ticks_a[t], ticks_b[t]
        for name in a:
            if name in skipped or name.startswith(NOT_COMPARED_PREFIX) or name not in b:
                continue
            x, y = _number(a[name]), _number(b[name])
            if x is not None and y is not None:
                per.setdefault(name, []).append(relative_difference(x, y))
    metrics = {name: sum(v) / len(v) for name, v in sorted(per.items())}
    total = sum(metrics.values()) / len(metrics) if metrics else None
    return {"divergence": total, "metrics": metrics, "ticks": len(common)}
