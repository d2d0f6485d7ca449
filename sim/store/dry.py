"""A store that reads from another and writes nowhere: what a replay that only compares runs against.

`societas replay` re-runs a stored run from the LLM cache and compares it tick by tick with the original.
Run against a `DryStore`, everything the run reads (the LLM cache, the original's ticks) comes from the real
store and everything it would write (its row, ticks, agents, its end) is dropped, so a replay leaves the store
as it found it: a 249 MB store stayed 249 MB, where a stored replay doubled it.
"""

from __future__ import annotations

from typing import Any

from sim.store.store import Store

#: the Store methods that write: a DryStore drops their calls
WRITES = frozenset({"create_run", "record_tick", "set_initial", "add_agents", "finish_run", "delete_run", "claim",
                    "copy_ticks", "save_sweep", "checkpoint"})


class DryStore:
    """`store` for reading; each of its writing methods (`WRITES`) does nothing and returns None."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        if name in WRITES:
            return _dropped
        return getattr(self._store, name)


def _dropped(*args: Any, **kwargs: Any) -> None:
    return None
