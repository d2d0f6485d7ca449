"""Published reference values beside a run's own: the rows `societas show` and the app display.

A scenario class may declare `reference = {metric: {"value": x, "source": "..."}}` (e.g. the
MoltBook figures of the social scenario; a `(value, source)` pair or a bare value also works);
`comparison_rows` pairs each with the run's final value. An entry's `set_by` says whether the run's figure is
an input (set by a config field) or emerges from what the agents do: only an emergent figure tests the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from scenarios.registry import describe


def comparison_rows(scenario: str, final_metrics: Mapping[str, Optional[float]]) -> list[dict[str, Any]]:
    """One row per published value: metric, value (the run's), published, difference (value - published; None if
    either is missing), source. No rows for a scenario without references, or one that cannot be loaded here."""
    reference = getattr(describe(scenario), "reference", None) or {}
    rows = []
    for metric, entry in reference.items():
        set_by = ""
        if isinstance(entry, dict):
            published, source = entry.get("value", entry.get("published")), str(entry.get("source", ""))
            set_by = str(entry.get("set_by", ""))
        elif isinstance(entry, (tuple, list)):
            published, source = entry[0], str(entry[1]) if len(entry) > 1 else ""
        else:
            published, source = entry, ""
        value = final_metrics.get(metric)
        difference = None if value is None or published is None else float(value) - float(published)
        rows.append({"metric": metric, "value": value, "published": published, "difference": difference, "source": source,
                     "set_by": set_by})
    return rows
