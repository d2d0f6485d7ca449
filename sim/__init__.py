"""societas: societies of LLM-driven agents on Mesa.

The public Python API (see `sim.api`), importable from here:

    from sim import run, load_run, runs, load_sweep, configure, spec, Result
    from sim import register, register_strategy, register_template, PromptTemplate

Names are resolved on first use, so `import sim.<module>` stays light (the CLI starts fast).
`register` and `register_strategy` come from `scenarios` (user-defined scenarios and scripted
strategies), `register_template` and `PromptTemplate` from `agents.llm.prompts` (prompt templates).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["Result", "configure", "spec", "run", "load_run", "runs", "load_sweep", "register", "register_strategy",
           "register_template", "PromptTemplate"]
_FROM = {"register": "scenarios", "register_strategy": "scenarios",
         "register_template": "agents.llm.prompts", "PromptTemplate": "agents.llm.prompts"}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors
    from agents.llm.prompts import PromptTemplate, register_template
    from scenarios import register, register_strategy
    from sim.api import Result, configure, load_run, load_sweep, run, runs, spec


def __getattr__(name: str) -> Any:
    if name in _FROM:
        import importlib

        return getattr(importlib.import_module(_FROM[name]), name)
    if name in __all__:
        from sim import api

        return getattr(api, name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
