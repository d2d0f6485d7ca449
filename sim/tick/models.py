"""Which model plays which agents: the backend name of each `llm` block a config gives a group of agents.

A run's LLM agents play the run's `llm` (backend `llm`) unless their group carries a block of its own
(`PopulationGroup.llm`, the market's `customer_llm` / `business_llm`). Each distinct block is one more
backend, named `llm:1`, `llm:2`... in the order the config names them (two groups with equal blocks share
one), so the broker batches each tick's decisions per model. An agent of such a group is built with the
policy `llm:K` (`SocietyAgent` splits it: policy `llm`, backend `llm:K`), and its requests go to that backend.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Optional

from sim.tick.config import ScenarioConfig

#: the backend of the run's own llm
RUN_LLM = "llm"


def _canonical(block: Mapping[str, Any]) -> str:
    return json.dumps(block, sort_keys=True, default=str)


def model_backends(config: ScenarioConfig) -> dict[str, dict[str, Any]]:
    """`llm:K` -> its block, for every distinct block of `config` (`ScenarioConfig.llm_blocks`), in order."""
    out: dict[str, dict[str, Any]] = {}
    seen: dict[str, str] = {}
    for _, block in config.llm_blocks():
        if block is None:
            continue
        key = _canonical(block)
        if key not in seen:
            seen[key] = f"{RUN_LLM}:{len(seen) + 1}"
            out[seen[key]] = dict(block)
    return out


def backend_for(config: ScenarioConfig, block: Optional[Mapping[str, Any]]) -> str:
    """The backend of agents whose group carries `block` (None: the run's llm)."""
    if block is None:
        return RUN_LLM
    key = _canonical(block)
    for name, known in model_backends(config).items():
        if _canonical(known) == key:
            return name
    raise KeyError(f"llm block {key[:80]} is not one of the config's")


def llm_policy(config: ScenarioConfig, block: Optional[Mapping[str, Any]]) -> str:
    """The policy an LLM agent of a group with `block` is built with: `llm`, or `llm:K` for a model of its own."""
    return backend_for(config, block)



def model_holders(config: ScenarioConfig, policy: str = "llm") -> dict[str, list[str]]:
    """Backend -> who plays it ("group 1", "customers"...) in a run of `policy`: `llm` for the groups of LLM agents
    without a block of their own."""
    out: dict[str, list[str]] = {}
    for who, block in config.llm_blocks(policy):
        out.setdefault(backend_for(config, block), []).append(who)
    return out
