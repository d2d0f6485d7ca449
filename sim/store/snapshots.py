"""When two ticks are the same: one definition for resume, fork and replay.

A tick is its metrics, its world state, every agent step (agent, action, payoff, reward, fallback,
memory snapshot) and every event (kind, actor, target, data), as the store keeps them (JSON round
trip). `snapshot_of` reads a tick the model just made, `Store.tick_snapshots` the stored ones, and
`diff_ticks` says what differs first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from sim.core.records import TickRecord
from sim.store.encoding import plain


@dataclass(frozen=True)
class TickSnapshot:
    """A tick as stored: steps are [agent_id, action, payoff, reward, fallback, memory, reward vector] by agent id; events
    are [kind, actor, target, data] in the order they happened."""

    metrics: dict[str, Any]
    state: dict[str, Any]
    steps: list[list[Any]]
    events: list[list[Any]]


def snapshot_of(record: TickRecord) -> TickSnapshot:
    """The snapshot the store would give back for `record` once committed."""
    return TickSnapshot(
        plain(record.metrics), plain(record.state),
        plain([[s.agent_id, s.action, s.payoff, s.reward, s.fallback, s.memory, s.components] for s in record.steps]),
        plain([[e.kind, e.actor, e.target, e.data] for e in record.events]))


def diff_ticks(stored: Optional[TickSnapshot], other: TickSnapshot) -> Optional[str]:
    """None when `other` equals the stored tick; else what differs first, in words."""
    if stored is None:
        return "not stored"
    for part in ("metrics", "state", "steps", "events"):
        mine, theirs = getattr(stored, part), getattr(other, part)
        if mine == theirs:
            continue
        if part == "steps":
            for a, b in zip(mine, theirs):
                if a != b:
                    if a[:6] == b[:6]:
                        return f"agent {a[0]}'s reward vector differs (stored {a[6]}, replayed {b[6]})"
                    return f"agent {a[0]}'s step differs (stored {a[1:5]}, replayed {b[1:5]})"
            return f"steps differ ({len(mine)} stored, {len(theirs)} replayed)"
        return f"{part} differ"
    return None
