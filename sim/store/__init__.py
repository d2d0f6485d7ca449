"""The store: SQLModel tables, the engine and its migrations, the `Store` that commits one tick per
transaction, run liveness and tick snapshots. Stands on `sim.core` only.

    from sim.store import Store    # what scripts have long imported from here
"""

from sim.store.store import Store

__all__ = ["Store"]
