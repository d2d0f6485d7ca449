"""Replay a stored run from the LLM cache and compare it, tick by tick, with the original."""

from __future__ import annotations

from typing import Any

from sim.contracts import RunSpec
from sim.runner import RunFailed, execute
from sim.store import Store


def _tick_view(store: Store, run_id: str) -> dict[int, dict[str, Any]]:
    view: dict[int, dict[str, Any]] = {}
    for t in store.ticks(run_id):
        view[t.tick] = {"metrics": t.metrics, "state": t.state, "steps": []}
    for s in store.steps(run_id):
        view[s.tick]["steps"].append((s.agent_id, s.action, s.payoff, s.reward, s.fallback))
    return view


def replay_run(store: Store, run_id: str) -> dict[str, Any]:
    """Re-run `run_id`'s spec with a cache-only LLM backend; report whether every stored tick matched.

    An unfinished original (failed, interrupted, killed) is replayed only for the ticks it
    stored, and the report says it was incomplete: its missing ticks are not mismatches.
    """
    original = store.get_run(run_id)
    spec = RunSpec.model_validate(original.spec)
    finished = original.status in ("finished", "collapsed")
    incomplete = None if finished else f"{original.status}{': ' + original.reason if original.reason else ''}, {original.ticks} ticks stored"
    if not finished and original.ticks == 0:
        return {"run_id": run_id, "replay_run_id": None, "ticks": 0, "matched": True, "mismatches": [],
                "incomplete": incomplete}
    try:
        result = execute(spec, store, cache_only=True, origin="replay", parent_id=run_id,
                         stop_after=None if finished else original.ticks)
        replay_id, error = result.run_id, None
    except RunFailed as exc:
        replay_id, error = exc.run_id, exc.reason
    a, b = _tick_view(store, run_id), _tick_view(store, replay_id)
    mismatches = []
    for tick in sorted(set(a) | set(b)):
        if tick not in b:
            mismatches.append({"tick": tick, "what": "missing in replay"})
        elif tick not in a:
            mismatches.append({"tick": tick, "what": "extra in replay"})
        else:
            for part in ("steps", "metrics", "state"):
                if a[tick][part] != b[tick][part]:
                    mismatches.append({"tick": tick, "what": f"{part} differ"})
    if error:
        mismatches.append({"tick": max(b, default=0) + 1, "what": error})
    replayed = store.get_run(replay_id)
    same_end = replayed.status == original.status if finished else replayed.status in ("stopped", "collapsed")
    return {"run_id": run_id, "replay_run_id": replay_id, "ticks": len(a), "matched": not mismatches and same_end,
            "mismatches": mismatches, "incomplete": incomplete}
