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
    """Re-run `run_id`'s spec with a cache-only LLM backend; report whether every tick matched."""
    original = store.get_run(run_id)
    spec = RunSpec.model_validate(original.spec)
    try:
        result = execute(spec, store, cache_only=True)
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
    return {"run_id": run_id, "replay_run_id": replay_id, "ticks": len(a), "matched": not mismatches and original.status == store.get_run(replay_id).status,
            "mismatches": mismatches}
