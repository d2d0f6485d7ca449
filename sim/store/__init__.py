"""The store, the one door to the database: SQLModel tables, the engine and its migrations, the `Store` that
commits one tick per transaction (or a group of them: `grouped`, for env episodes), the app's read-only queries (`queries`, `event_queries`), run liveness and
tick snapshots. Stands on `sim.core` only.

    from sim.store import Store, Run    # what scripts have long imported from here

This package's own names are resolved on first use (PEP 562): importing `sim.store.liveness` or
`sim.store.urls` loads no database library.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = ["Store", "Run", "Tick", "AgentStep", "EventRow", "LLMCall", "SweepRow", "RUN_STATUSES", "dumps", "make_engine",
           "sqlite_path"]
_FROM = {"Store": "sim.store.store", "dumps": "sim.store.encoding", "make_engine": "sim.store.schema",
         "sqlite_path": "sim.store.schema"}

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors
    from sim.store.encoding import dumps
    from sim.store.schema import make_engine, sqlite_path
    from sim.store.store import Store
    from sim.store.tables import RUN_STATUSES, AgentStep, EventRow, LLMCall, Run, SweepRow, Tick


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module(_FROM.get(name, "sim.store.tables")), name)
    raise AttributeError(f"module 'sim.store' has no attribute {name!r}")
