"""societas: societies of LLM-driven agents on Mesa.

The public Python API (see `societas.api`), importable from here:

    from sim import run, probe, load_run, runs, load_sweep, configure, spec, Result, UsageError, RunFailed
    from sim import interview, survey, survey_sweep
    from sim import register, register_strategy, register_template, PromptTemplate

This package is the engine a scenario stands on, in layers, each importing only those below it:
`sim.core` → `sim.contracts`, `sim.reward`, `sim.store` → `sim.tick`, and the public faces a scenario file
imports (`sim.model`, `sim.spaces`, `sim.errors`, `sim.contracts`). Above it stand the decision backends
(`agents`), the scenarios, the runner, `analysis` and the faces (`societas`: the CLI, the API, the env, the
conformance kit). This module, `sim.env` and `sim.testing` are the addresses where users import three of those
faces: the names here are resolved on first use (PEP 562), so importing `sim.core.spaces` never imports the
top of the stack, which stands on it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["Result", "configure", "spec", "run", "probe", "load_run", "runs", "load_sweep", "interview", "survey",
           "survey_sweep", "register", "register_strategy", "register_template", "PromptTemplate", "UsageError", "RunFailed"]
#: names that a scenario or prompt file uses while it is imported: resolved from where they are defined (the same
#: objects societas.api gives), so that `@sim.register` in a file loads no runner, pandas or model
_FROM = {"register": "scenarios.registry", "register_strategy": "scenarios.registry",
         "register_template": "agents.llm.prompts", "PromptTemplate": "agents.llm.prompts"}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors
    from societas.api import (PromptTemplate, Result, RunFailed, UsageError, configure, interview, load_run, load_sweep,
                              probe, register, register_strategy, register_template, run, runs, spec, survey,
                              survey_sweep)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(_FROM.get(name, "societas.api")), name)
    raise AttributeError(f"module 'sim' has no attribute {name!r}")
