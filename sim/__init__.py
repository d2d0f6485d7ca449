"""societas: societies of LLM-driven agents on Mesa.

The public Python API (see `societas.api`), importable from here:

    from sim import run, probe, load_run, runs, load_sweep, configure, spec, Result, UsageError, RunFailed
    from sim import register, register_strategy, register_template, PromptTemplate

The engine is in layers, each importing only those below it: `sim.core` (contracts) → `sim.reward`,
`sim.store` → `agents` → `sim.tick` → `scenarios` → `runner` → `analysis` → `societas.api`, `societas.cli`.
This package's own names are resolved on first use (PEP 562): importing `sim.core.spaces` must not
import the top of the stack, which stands on it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["Result", "configure", "spec", "run", "probe", "load_run", "runs", "load_sweep", "register", "register_strategy",
           "register_template", "PromptTemplate", "UsageError", "RunFailed"]
_FROM = {"register": "scenarios.registry", "register_strategy": "scenarios.registry",
         "register_template": "agents.llm.prompts", "PromptTemplate": "agents.llm.prompts"}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors
    from agents.llm.prompts import PromptTemplate, register_template
    from scenarios.registry import register, register_strategy
    from societas.api import Result, RunFailed, UsageError, configure, load_run, load_sweep, probe, run, runs, spec


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(_FROM.get(name, "societas.api")), name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
