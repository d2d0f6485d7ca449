"""Running specs: config at the boundary (YAML, --set) into a RunSpec, the backends a spec needs, how a run
starts (fresh, resumed, forked, replayed, a sweep's cell: `plans`), the execution that commits every tick,
validity probes, sweeps, and the app's launcher (runs started as `societas` commands in the background).
Stands on everything below it: the engine (`sim`), the decision backends (`agents`) and the scenarios.

    from runner import execute, RunFailed

This package's own names are resolved on first use (PEP 562): importing one of its light modules
(`runner.limits`, `runner.sweeps.progress`) loads no scenario, no Mesa and no model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["execute", "RunFailed", "RunInterrupted", "RunResult", "make_backends", "horizon", "versions", "Progress"]
_FROM = {"make_backends": "runner.backends"}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors
    from runner.backends import make_backends
    from runner.execution import Progress, RunFailed, RunInterrupted, RunResult, execute, horizon, versions


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(_FROM.get(name, "runner.execution")), name)
    raise AttributeError(f"module 'runner' has no attribute {name!r}")
