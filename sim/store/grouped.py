"""Group commit: a run's ticks committed K at a time, for the PettingZoo env's episodes (`societas.env`).

A tick committed alone costs an env step most of its store time (the transaction, the runs row's progress):
`GroupCommit` encodes each tick's rows when the tick ends (`Store.tick_rows`) and commits every `every` ticks
in one transaction (`Store.commit_ticks`). Before any other call to the store (the run's end, failed or not,
a read) the pending ticks are committed first, so the stored rows are exactly those tick-by-tick commits make.
What a crash (kill -9) loses is the pending ticks, at most `every - 1`: the run stays `running` at its last
committed tick, and resumes from there like any other. `every=1` commits every tick, as `societas run` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sim.core.records import TickRecord
from sim.store.store import Store, TickRows


class GroupCommit:
    """A `Store` whose `record_tick` commits every `every` ticks; every other call commits the pending ticks first."""

    def __init__(self, store: Store, every: int) -> None:
        if every < 1:
            raise ValueError(f"a group commit has at least one tick, not {every}")
        self.store, self.every = store, every
        self._pending: list[TickRows] = []

    def record_tick(self, run_id: str, record: TickRecord, llm_calls: Iterable[dict[str, Any]] = (),
                    duration_s: float = 0.0) -> None:
        """Keep the tick's rows (encoded now); commit the group once it holds `every` ticks."""
        self._pending.append(self.store.tick_rows(run_id, record, llm_calls, duration_s))
        if len(self._pending) >= self.every:
            self.flush()

    def add_agents(self, run_id: str, profiles: Sequence[dict[str, Any]]) -> None:
        """As `Store.add_agents`, without committing the pending ticks: it writes other rows, idempotently (a run that
        resumes after a crash adds nothing twice), and a run calls it after every tick."""
        self.store.add_agents(run_id, profiles)

    def flush(self) -> None:
        """Commit the pending ticks in one transaction. They are taken first: a group that fails to commit is not
        tried again by the run's failure record that follows (the run stays at its last committed tick)."""
        pending, self._pending = self._pending, []
        if pending:
            self.store.commit_ticks(pending)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.store, name)
        if not callable(attr):
            return attr

        def after_pending(*args: Any, **kwargs: Any) -> Any:
            self.flush()
            return attr(*args, **kwargs)

        return after_pending


__all__ = ["GroupCommit"]
