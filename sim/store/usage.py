"""LLM usage aggregated in SQL: what `Store.llm_usage` and the app's usage tables read (no pandas, so the commands
that open a store stay light)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import case, func, select
from sqlalchemy.engine import Engine

from sim.store.tables import LLMCall

CALLS = LLMCall.__table__


def llm_usage(engine: Engine, run_ids: Sequence[str]) -> list[dict[str, Any]]:
    """LLM calls per run, backend and model (`llm` is the run's own model, `llm:K` a group's: sim.tick.models): calls,
    cache hits, tokens in and out of all calls and of those the model answered (`live_*`: what a price table charges),
    latency and fallbacks, aggregated in SQL."""
    c = CALLS.c
    live = c.cache_hit == False  # noqa: E712
    query = (select(c.run_id, c.backend, c.model_id, func.count().label("calls"),
                    func.sum(case((c.cache_hit, 1), else_=0)).label("cache_hits"),
                    func.sum(c.tokens_in).label("tokens_in"), func.sum(c.tokens_out).label("tokens_out"),
                    func.sum(case((live, c.tokens_in), else_=0)).label("live_tokens_in"),
                    func.sum(case((live, c.tokens_out), else_=0)).label("live_tokens_out"),
                    func.sum(c.latency_s).label("latency_s"), func.sum(case((c.fallback, 1), else_=0)).label("fallbacks"))
             .where(c.run_id.in_(list(run_ids))).group_by(c.run_id, c.backend, c.model_id)
             .order_by(c.run_id, c.backend, c.model_id))
    with engine.connect() as conn:
        return [{k: (v if v is not None else 0) for k, v in row.items()} for row in conn.execute(query).mappings()]
