"""The store: SQLModel tables, the engine and its migrations, the `Store` that commits one tick per
transaction, run liveness and tick snapshots. Stands on `sim.core` only.

    from sim.store import Store, Run    # what scripts have long imported from here
"""

from sim.store.encoding import dumps
from sim.store.schema import make_engine, sqlite_path
from sim.store.store import Store
from sim.store.tables import RUN_STATUSES, AgentStep, EventRow, LLMCall, Run, SweepRow, Tick

__all__ = ["Store", "Run", "Tick", "AgentStep", "EventRow", "LLMCall", "SweepRow", "RUN_STATUSES", "dumps", "make_engine",
           "sqlite_path"]
