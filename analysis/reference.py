"""Published reference values beside a run's own: the rows `societas show` and the app display.

A scenario class may declare `reference = {metric: {"value": x, "source": "..."}}` (e.g. the
MoltBook figures of the social scenario); `comparison_rows` pairs each with the run's final value.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional


def comparison_rows(scenario: str, final_metrics: Mapping[str, Optional[float]]) -> list[dict[str, Any]]:
    """One row per published value: metric, published, run, difference (run - published; None if missing), source."""
    from scenarios import get_scenario

    reference = getattr(get_scenario(scenario), "reference", {}) or {}
    rows = []
    for metric, ref in reference.items():
        value = final_metrics.get(metric)
        rows.append({
            "metric": metric, "published": ref["value"], "run": value,
            "difference": None if value is None else float(value) - float(ref["value"]),
            "source": ref.get("source", ""),
        })
    return rows
