"""A stored run summarised as plain data: what `societas show` prints."""

from __future__ import annotations

from typing import Any, Optional

from agents.llm.archetypes import STATS_DOCS
from agents.sandbox.levels import of_run as sandbox_of_run
from analysis.model_usage import Prices, model_usage, total_cost
from analysis.reference import comparison_rows
from scenarios.registry import describe
from sim.reward.docs import scenario_metric_docs
from sim.store.liveness import liveness
from sim.store.store import Store


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


def status_text(run: Any) -> str:
    """The status as a person should read it: a killed run says it is stale, not that it runs."""
    if liveness(run) == "stale":
        who = f"pid {run.owner_pid} on {run.owner_host}" if run.owner_pid else "its process"
        return f"stale (was running; {who} is gone; last tick {run.ticks})"
    return run.status


def run_row(run: Any) -> dict[str, Any]:
    """One line of `societas list`."""
    return {"run_id": run.id, "scenario": run.scenario, "status": run.status, "status_text": status_text(run),
            "live": liveness(run), "seed": run.seed, "ticks": run.ticks, "policy": run.policy,
            "decided_by": run.backends or run.policy, "origin": run.origin, "parent_id": run.parent_id,
            "sweep_id": run.sweep_id, "cached": bool(run.cached), "created_at": run.created_at.isoformat()}


def run_summary(store: Store, run_id: str, prices: Optional[Prices] = None) -> dict[str, Any]:
    """Spec, status, final metrics, per-tick metrics, fallback count and LLM usage of a run: per agent, and per group
    and model with its cost under `prices` (default: the built-in price table, analysis.model_usage)."""
    run = store.get_run(run_id)
    by_model = model_usage(store, run.id, prices)
    return {
        "run_id": run.id, "scenario": run.scenario, "seed": run.seed, "policy": run.policy,
        "status": run.status, "status_text": status_text(run), "reason": run.reason, "ticks": run.ticks,
        "duration_s": run.duration_s, "created_at": run.created_at.isoformat(), "origin": run.origin,
        "parent_id": run.parent_id, "branch_tick": run.branch_tick, "sweep_id": run.sweep_id,
        "decided_by": run.backends or run.policy, "cached": bool(run.cached),
        "config": run.spec.get("config", {}), "spec": run.spec, "versions": run.versions,
        "sandbox": _sandbox(run.spec),
        "final_metrics": run.final_metrics, "metric_docs": _docs(run),
        "reference": comparison_rows(run.scenario, run.final_metrics or {}),
        "per_tick": [{"tick": t.tick, "metrics": t.metrics} for t in store.ticks(run_id)],
        "fallbacks": store.fallback_count(run_id),
        "llm": {**llm_usage(store.llm_calls(run_id)), "by_model": by_model, "cost": total_cost(by_model)},
    }


def _sandbox(spec: dict[str, Any]) -> Optional[dict[str, str]]:
    """The isolation level the run's LLM-written code ran under and what it guarantees (None: it ran no such code)."""
    found = sandbox_of_run(spec)
    return None if found is None else {"level": found[0], "guarantees": found[1]}


TEXT_KEYS = ("text", "message", "content", "body", "title")


def tick_messages(store: Store, run_id: str, tick: int) -> list[dict[str, Any]]:
    """What agents said in a tick: every event of that tick that carries text, in order."""
    out = []
    for e in store.events(run_id, tick=tick):
        if e.kind.startswith("norm."):  # norm records quote what was said; the message itself is listed
            continue
        text = next((e.data[k] for k in TEXT_KEYS if isinstance(e.data, dict) and isinstance(e.data.get(k), str)), None)
        if text is not None:
            out.append({"kind": e.kind, "actor": e.actor, "target": e.target, "text": text})
    return out


def _docs(run: Any) -> dict[str, dict[str, str]]:
    """The run's scenario's metric docs, with the archetype counts' where the run has them."""
    docs = scenario_metric_docs(describe(run.scenario))
    if any(k in (run.final_metrics or {}) for k in STATS_DOCS):
        docs["final"] = {**docs["final"], **STATS_DOCS}
    return docs
