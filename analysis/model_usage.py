"""LLM usage per model and per group of agents, and what it cost: `societas show`, the export, sweeps, the app.

A run whose population groups (or market sides) play models of their own (sim.tick.models) has one backend per
model: `llm` for the run's own, `llm:K` for the others. Usage is counted per backend from the store's `llm_calls`
(in SQL: `Store.llm_usage`), named by who plays it ("group 1", "customers"...) and by its model.

A price table (`analysis/prices.yaml`, or a file of the user's) gives each model's price per million input and
output tokens; a call's model id is matched against each pattern (fnmatch), first match wins. Only the calls a
model answered cost anything: a cache hit is free, so a cached rerun costs 0.
"""

from __future__ import annotations

import fnmatch
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import yaml
from pydantic import ValidationError

from scenarios.registry import describe
from sim.core.errors import UsageError
from sim.core.spec import LLMSpec, group_llm
from sim.store.store import Store
from sim.tick.models import RUN_LLM, model_backends, model_holders

#: the price table used when none is given (and $SOCIETAS_PRICES is unset)
DEFAULT_PRICES = Path(__file__).with_name("prices.yaml")


@dataclass(frozen=True)
class Prices:
    """A price table: (pattern, input price, output price) per model, per `per_tokens` tokens, in `currency`."""

    rules: tuple[tuple[str, float, float], ...]
    currency: str = "USD"
    per_tokens: int = 1_000_000
    source: str = ""

    def price(self, model_id: str) -> Optional[tuple[float, float]]:
        """(input, output) price of `model_id`, or None when no pattern matches it."""
        for pattern, cost_in, cost_out in self.rules:
            if fnmatch.fnmatchcase(model_id, pattern):
                return cost_in, cost_out
        return None

    def cost(self, model_id: str, tokens_in: int, tokens_out: int) -> Optional[float]:
        """What `tokens_in` prompt and `tokens_out` completion tokens of `model_id` cost (None: no price for it)."""
        found = self.price(model_id)
        if found is None:
            return None
        return (tokens_in * found[0] + tokens_out * found[1]) / self.per_tokens


def load_prices(path: Optional[str | Path] = None) -> Prices:
    """The price table at `path` (default: $SOCIETAS_PRICES, else the built-in one); UsageError, one line, when it
    cannot be read or is malformed."""
    chosen = Path(path or os.environ.get("SOCIETAS_PRICES") or DEFAULT_PRICES).expanduser()
    where = f"price table {str(chosen)!r}"
    try:
        data = yaml.safe_load(chosen.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"bad value for '--prices': cannot read {where}: {exc.strerror or exc}") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise UsageError(f"bad value for '--prices': {where} is not YAML: {str(exc).splitlines()[0][:120]}") from None
    if not isinstance(data, dict) or not isinstance(data.get("models"), list):
        raise UsageError(f"bad value for '--prices': {where} needs a `models:` list of {{match, input, output}}")
    per = data.get("per_tokens", 1_000_000)
    if isinstance(per, bool) or not isinstance(per, int) or per < 1:
        raise UsageError(f"bad value for '--prices': {where}: per_tokens must be a whole number >= 1, got {str(per)[:40]!r}")
    rules = []
    for k, rule in enumerate(data["models"]):
        if not isinstance(rule, dict) or not isinstance(rule.get("match"), str) or not rule["match"]:
            raise UsageError(f"bad value for '--prices': {where}: models[{k}] needs a `match` pattern (a string)")
        prices = []
        for side in ("input", "output"):
            v = rule.get(side)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise UsageError(f"bad value for '--prices': {where}: models[{k}].{side} must be a price >= 0, got "
                                 f"{str(v)[:40]!r}")
            prices.append(float(v))
        rules.append((rule["match"], prices[0], prices[1]))
    return Prices(tuple(rules), str(data.get("currency", "USD")), per, str(chosen))


def run_models(spec: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """Backend -> (who plays it, the model's label) for a stored run's spec; {} where the scenario cannot be read."""
    try:
        scenario = describe(spec["scenario"])
        if scenario is None:
            return {}
        config = scenario.Config.model_validate(spec.get("config") or {})
        run_llm = LLMSpec.model_validate(spec.get("llm") or {})
    except (UsageError, ValidationError, KeyError, TypeError):
        return {}
    holders = model_holders(config, str(spec.get("policy") or "scripted"))
    out = {RUN_LLM: (", ".join(holders.get(RUN_LLM, [])) or "all LLM agents", run_llm.label())}
    for name, block in model_backends(config).items():
        try:
            label = group_llm(run_llm, block).label()
        except ValidationError:
            label = "?"
        out[name] = (", ".join(holders.get(name, [])), label)
    return out


def model_usage(store: Store, run_id: str, prices: Optional[Prices] = None) -> list[dict[str, Any]]:
    """One row per backend and model of a run: who plays it, the model, calls, cache hits, tokens, latency (total
    and mean per call the model answered), fallbacks and cost (None where the table has no price for the model)."""
    run = store.get_run(run_id)
    return usage_rows(store.llm_usage([run.id]), run.spec, prices)


def usage_rows(usage: Sequence[Mapping[str, Any]], spec: Mapping[str, Any],
               prices: Optional[Prices] = None) -> list[dict[str, Any]]:
    """`model_usage`'s rows from a run's aggregated calls (`sim.store.queries.llm_usage`) and its stored spec."""
    prices = prices if prices is not None else load_prices()
    who = run_models(spec)
    rows = []
    for u in usage:
        live = u["calls"] - u["cache_hits"]
        group, label = who.get(u["backend"], ("", ""))
        rows.append({"backend": u["backend"], "group": group, "model": label or u["model_id"], "model_id": u["model_id"],
                     "calls": u["calls"], "cache_hits": u["cache_hits"], "tokens_in": u["tokens_in"],
                     "tokens_out": u["tokens_out"], "latency_s": round(float(u["latency_s"]), 4),
                     "latency_per_call_s": round(float(u["latency_s"]) / live, 4) if live else None,
                     "fallbacks": u["fallbacks"],
                     "cost": prices.cost(u["model_id"], u["live_tokens_in"], u["live_tokens_out"])})
    return rows


def total_cost(rows: Sequence[Mapping[str, Any]]) -> Optional[float]:
    """The cost of a run's rows of `model_usage` (None when some model has no price)."""
    costs = [r["cost"] for r in rows]
    return None if any(c is None for c in costs) else float(sum(costs))


def runs_cost(store: Store, run_ids: Sequence[str], prices: Optional[Prices] = None) -> dict[str, Optional[float]]:
    """The cost of each of the runs that called an LLM (None when some model it called has no price), in one query;
    runs without LLM calls are left out."""
    usage = store.llm_usage(run_ids)
    if not usage:
        return {}
    prices = prices if prices is not None else load_prices()
    out: dict[str, Optional[float]] = {}
    for u in usage:
        cost = prices.cost(u["model_id"], u["live_tokens_in"], u["live_tokens_out"])
        before = out.get(u["run_id"], 0.0)
        out[u["run_id"]] = None if cost is None or before is None else before + cost
    return out
