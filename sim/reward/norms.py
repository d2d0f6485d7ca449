"""Norm events: stated, kept, broken, sanctioned.

A `NormLedger` turns norm happenings into `Event`s (kinds `norm.statement`, `norm.adoption`,
`norm.compliance`, `norm.violation`, `norm.sanction`) and keeps the counts the metrics need.
A statement is someone saying what the norm should be; an adoption is a group putting a norm
in force (by a vote, a decree...), which stays in force until the next adoption of that norm.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from sim.core.contracts import Event


KINDS = ("statement", "adoption", "compliance", "violation", "sanction")


@dataclass
class NormLedger:
    """Collects one tick's norm events; `flush()` hands them over and starts a new tick."""

    events: list[Event] = field(default_factory=list)
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))

    def _add(self, kind: str, actor: Optional[int], target: Optional[int], data: Mapping[str, Any]) -> Event:
        event = Event(kind=f"norm.{kind}", actor=actor, target=target, data=dict(data))
        self.events.append(event)
        self.totals[kind] += 1
        return event

    def statement(self, proposer: Optional[int], norm: str, rule: Mapping[str, Any], text: str = "") -> Event:
        """A norm is stated (proposer None: stated by the institution)."""
        return self._add("statement", proposer, None, {"norm": norm, "rule": dict(rule), "text": text})

    def adoption(self, norm: str, rule: Mapping[str, Any], text: str = "", by: Optional[int] = None, **data: Any) -> Event:
        """A norm is put in force (by None: the group, e.g. by a vote; extra data such as the tally)."""
        return self._add("adoption", by, None, {"norm": norm, "rule": dict(rule), "text": text, **data})

    def compliance(self, agent: int, norm: str, **data: Any) -> Event:
        return self._add("compliance", agent, None, {"norm": norm, **data})

    def violation(self, agent: int, norm: str, **data: Any) -> Event:
        return self._add("violation", agent, None, {"norm": norm, **data})

    def sanction(self, sanctioner: int, target: int, norm: str, cost: float, fine: float) -> Event:
        """`sanctioner` pays `cost` to fine `target` by `fine`."""
        return self._add("sanction", sanctioner, target, {"norm": norm, "cost": cost, "fine": fine})

    def tick_counts(self) -> dict[str, int]:
        counts = dict.fromkeys(KINDS, 0)
        for e in self.events:
            counts[e.kind.split(".", 1)[1]] += 1
        return counts

    def sanctioned(self) -> set[int]:
        """Agents sanctioned in the current tick."""
        return {e.target for e in self.events if e.kind == "norm.sanction" and e.target is not None}

    def flush(self) -> list[Event]:
        out, self.events = self.events, []
        return out
