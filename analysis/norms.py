"""The norm view of any run, read from the reward layer's norm events only (kinds `norm.*`).

Every function takes events as stored (`EventRow`s, or anything with `tick`, `kind`, `actor`,
`target` and `data`, or plain dicts with those keys), so it works for every scenario and can be
tested on hand-made months without a database. `norm_view(store, run_id)` gathers them all.

- `norm_timeline`: per tick, the norms stated (who, rule, text) and adopted, and the norms in
  force after that tick (an adoption stays in force until the next adoption of the same norm).
- `compliance_by_tick`: compliances, violations and the compliance rate per tick.
- `sanctions_by_agent`: sanctions given and received per agent, with costs paid and fines taken.
- `norm_drift`: how much the stated norms change over time (defined at `norm_drift`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

KINDS = ("norm.statement", "norm.adoption", "norm.compliance", "norm.violation", "norm.sanction")
_WORD = re.compile(r"[a-z]{3,}")


@dataclass(frozen=True)
class NormEvent:
    """One norm event, whatever it was read from."""

    tick: int
    kind: str
    actor: Optional[int]
    target: Optional[int]
    data: Mapping[str, Any]


def _as_event(e: Any) -> NormEvent:
    get = e.get if isinstance(e, Mapping) else lambda k, d=None: getattr(e, k, d)
    return NormEvent(int(get("tick")), str(get("kind")), get("actor"), get("target"), get("data") or {})


def norm_events(events: Iterable[Any]) -> list[NormEvent]:
    """The norm events among `events` (kinds norm.*), in tick order (stable within a tick)."""
    out = [ev for ev in map(_as_event, events) if ev.kind.startswith("norm.")]
    return sorted(out, key=lambda ev: ev.tick)


def load_norm_events(store: Any, run_id: str) -> list[NormEvent]:
    """A stored run's norm events."""
    return norm_events(store.events(run_id))


def norm_timeline(events: Iterable[Any]) -> list[dict[str, Any]]:
    """One row per tick with a statement or adoption: what was stated, what was adopted, what is in force."""
    in_force: dict[str, dict[str, Any]] = {}
    rows: dict[int, dict[str, Any]] = {}
    for ev in norm_events(events):
        if ev.kind not in ("norm.statement", "norm.adoption"):
            continue
        row = rows.setdefault(ev.tick, {"tick": ev.tick, "stated": [], "adopted": []})
        entry = {"norm": ev.data.get("norm"), "rule": dict(ev.data.get("rule") or {}), "text": ev.data.get("text", "")}
        if ev.kind == "norm.statement":
            row["stated"].append({"by": ev.actor, **entry})
        else:
            extra = {k: v for k, v in ev.data.items() if k not in ("norm", "rule", "text")}
            row["adopted"].append({"by": ev.actor, **entry, **extra})
            in_force[str(entry["norm"])] = entry["rule"]
        row["in_force"] = {k: dict(v) for k, v in in_force.items()}
    return [rows[t] for t in sorted(rows)]


def compliance_by_tick(events: Iterable[Any]) -> list[dict[str, Any]]:
    """Per tick with a judged act: compliances, violations and rate = compliances / judged."""
    counts: dict[int, list[int]] = {}
    for ev in norm_events(events):
        if ev.kind in ("norm.compliance", "norm.violation"):
            c = counts.setdefault(ev.tick, [0, 0])
            c[ev.kind == "norm.violation"] += 1
    return [{"tick": t, "compliances": c, "violations": v, "rate": c / (c + v)} for t, (c, v) in sorted(counts.items())]


def sanctions_by_agent(events: Iterable[Any]) -> dict[int, dict[str, float]]:
    """Per agent: sanctions given and received, cost paid (as sanctioner) and fines taken (as target)."""
    out: dict[int, dict[str, float]] = {}

    def row(agent: int) -> dict[str, float]:
        return out.setdefault(agent, {"given": 0, "received": 0, "cost_paid": 0.0, "fines_received": 0.0})

    for ev in norm_events(events):
        if ev.kind != "norm.sanction":
            continue
        if ev.actor is not None:
            r = row(ev.actor)
            r["given"] += 1
            r["cost_paid"] += float(ev.data.get("cost", 0.0))
        if ev.target is not None:
            r = row(ev.target)
            r["received"] += 1
            r["fines_received"] += float(ev.data.get("fine", 0.0))
    return dict(sorted(out.items()))


def _numbers(stated: list[NormEvent]) -> dict[str, float]:
    """Mean of each numeric rule field over a tick's statements."""
    sums: dict[str, list[float]] = {}
    for ev in stated:
        for k, v in (ev.data.get("rule") or {}).items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                s = sums.setdefault(k, [0.0, 0])
                s[0] += v
                s[1] += 1
    return {k: s / n for k, (s, n) in sums.items()}


def _words(stated: list[NormEvent]) -> set[str]:
    return {w for ev in stated for w in _WORD.findall(str(ev.data.get("text", "")).lower())}


def similarity(a: list[Any], b: list[Any]) -> Optional[float]:
    """Similarity in [0, 1] of two sets of stated norms (see `norm_drift`); None when nothing compares."""
    a, b = [_as_event(x) for x in a], [_as_event(x) for x in b]
    na, nb = _numbers(a), _numbers(b)
    shared = sorted(set(na) & set(nb))
    if shared:
        sims = [1.0 if max(abs(na[k]), abs(nb[k])) == 0 else 1.0 - abs(na[k] - nb[k]) / max(abs(na[k]), abs(nb[k])) for k in shared]
        return max(0.0, sum(sims) / len(sims))
    wa, wb = _words(a), _words(b)
    if not (wa or wb):
        return None
    return len(wa & wb) / len(wa | wb)


def norm_drift(events: Iterable[Any], norm: Optional[str] = None) -> list[dict[str, Any]]:
    """How stated norms change over time, per norm name and per tick with statements of it.

    The statements of one tick are compared with those of the previous tick that stated the
    same norm (`to_previous`) and with the first such tick (`to_first`). Similarity is defined
    on what was stated:
    - rules with numeric fields (e.g. `max_catch`): for each field both ticks state, 1 minus the
      relative difference of the two ticks' mean values, |a - b| / max(|a|, |b|) (1 if both 0),
      averaged over the fields;
    - otherwise the texts: the Jaccard similarity of the two ticks' sets of words (3+ letters).
    `drift` is 1 - `to_previous` (None for the first tick, or when nothing compares).
    """
    by_norm: dict[str, dict[int, list[NormEvent]]] = {}
    for ev in norm_events(events):
        if ev.kind == "norm.statement" and (norm is None or ev.data.get("norm") == norm):
            by_norm.setdefault(str(ev.data.get("norm")), {}).setdefault(ev.tick, []).append(ev)
    out = []
    for name, ticks in sorted(by_norm.items()):
        order = sorted(ticks)
        for i, t in enumerate(order):
            prev = similarity(ticks[order[i - 1]], ticks[t]) if i else None
            first = similarity(ticks[order[0]], ticks[t]) if i else None
            numbers = _numbers(ticks[t])
            out.append({"norm": name, "tick": t, "statements": len(ticks[t]), "mean_rule": numbers,
                        "to_previous": prev, "to_first": first, "drift": None if prev is None else 1.0 - prev})
    return out


def norm_view(store: Any, run_id: str) -> dict[str, Any]:
    """The whole norm view of a stored run: timeline, compliance per tick, sanctions per agent, drift."""
    events = load_norm_events(store, run_id)
    return {
        "timeline": norm_timeline(events),
        "compliance": compliance_by_tick(events),
        "sanctions": sanctions_by_agent(events),
        "drift": norm_drift(events),
    }
