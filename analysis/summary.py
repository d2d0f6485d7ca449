"""A stored run summarised as plain data: what `societas show` prints."""

from __future__ import annotations

from typing import Any

from sim.store import Store


def llm_usage(calls: list[Any]) -> dict[str, Any]:
    """LLM calls, tokens, cache hits, latency and fallbacks: in all, per backend and per agent."""
    def agg(rows: list[Any]) -> dict[str, Any]:
        return {
            "calls": len(rows), "cache_hits": sum(r.cache_hit for r in rows),
            "tokens_in": sum(r.tokens_in for r in rows), "tokens_out": sum(r.tokens_out for r in rows),
            "latency_s": round(sum(r.latency_s for r in rows), 4), "fallbacks": sum(r.fallback for r in rows),
        }

    by_backend: dict[str, list[Any]] = {}
    by_agent: dict[tuple[str, int], list[Any]] = {}
    for c in calls:
        by_backend.setdefault(c.model_id, []).append(c)
        by_agent.setdefault((c.model_id, c.agent_id), []).append(c)
    return {
        **agg(calls),
        "by_backend": [{"backend": k, **agg(v)} for k, v in sorted(by_backend.items())],
        "by_agent": [{"backend": k[0], "agent_id": k[1], **agg(v)} for k, v in sorted(by_agent.items())],
    }


def run_summary(store: Store, run_id: str) -> dict[str, Any]:
    """Spec, status, final metrics, per-tick metrics, fallback count and LLM usage of a run."""
    run = store.get_run(run_id)
    steps = store.steps(run_id)
    return {
        "run_id": run.id, "scenario": run.scenario, "seed": run.seed, "policy": run.policy,
        "status": run.status, "reason": run.reason, "ticks": run.ticks, "duration_s": run.duration_s,
        "created_at": run.created_at.isoformat(), "config": run.spec.get("config", {}), "spec": run.spec,
        "versions": run.versions, "final_metrics": run.final_metrics,
        "per_tick": [{"tick": t.tick, "metrics": t.metrics} for t in store.ticks(run_id)],
        "fallbacks": sum(s.fallback for s in steps),
        "llm": llm_usage(store.llm_calls(run_id)),
    }
