"""An agent's memory over time (Concordia's memory timeline): from the memory snapshot stored with each of its
steps, every item with the tick it is about, when it entered the memory and the last tick it was still held (a
window drops old items; a summary may take their place)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd

COLUMNS = ["item", "tick", "kind", "text", "entered", "held_until", "forgotten"]


def memory_timeline(snapshots: Iterable[tuple[int, dict[str, Any]]], last_tick: int) -> pd.DataFrame:
    """One row per memory item an agent held: its own tick, kind and text, the first and last snapshot tick that held
    it, and whether it was dropped before `last_tick` (the run's last tick). `snapshots`: (tick, memory) pairs in
    any order, memory as stored ({"items": [{"tick", "kind", "text"}...], "summary": ...})."""
    seen: dict[tuple[Any, str, str], list[int]] = {}
    for tick, memory in sorted(snapshots, key=lambda p: p[0]):
        for item in (memory or {}).get("items") or []:
            key = (item.get("tick"), str(item.get("kind") or ""), str(item.get("text") or ""))
            span = seen.setdefault(key, [int(tick), int(tick)])
            span[1] = int(tick)
    rows = [{"tick": k[0], "kind": k[1], "text": k[2], "entered": s[0], "held_until": s[1], "forgotten": s[1] < last_tick}
            for k, s in seen.items()]
    frame = pd.DataFrame(rows, columns=COLUMNS[1:])
    frame = frame.sort_values(["entered", "tick"], kind="stable").reset_index(drop=True)
    frame.insert(0, "item", range(1, len(frame) + 1))
    return frame[COLUMNS]


def summaries(snapshots: Iterable[tuple[int, dict[str, Any]]]) -> pd.DataFrame:
    """tick, summary: each tick at which the memory's summary of older items changed."""
    rows, last = [], None
    for tick, memory in sorted(snapshots, key=lambda p: p[0]):
        text = str((memory or {}).get("summary") or "")
        if text and text != last:
            rows.append({"tick": int(tick), "summary": text})
        last = text or last
    return pd.DataFrame(rows, columns=["tick", "summary"])
