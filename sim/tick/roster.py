"""`model.agents` of a SocietyModel: Mesa's AgentSet, iterated from a cached tuple, with an id index.

Mesa iterates an AgentSet through a weak-key dictionary's Python generator (~0.3 µs per agent per
loop); a scenario loops over all agents several times a tick, which at 10,000 agents cost more
than the decisions. A `Roster` keeps the agents as a tuple (and sorted by id, with an id -> agent
map), rebuilt only when the set changes.

Built on Mesa's public API only: the model registers and deregisters its agents through
`Model.register_agent` / `deregister_agent` (SocietyModel adds them to its Roster there), and
every public AgentSet method that changes the set or its order (`add`, `discard`, `remove`, and
`shuffle` / `sort` / `select` in place) is overridden to call Mesa's and then drop the cache.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from operator import attrgetter
from typing import Any, Optional

import mesa
import numpy as np
from mesa.agent import AgentSet

_by_id = attrgetter("unique_id")


class Roster(AgentSet):
    """An AgentSet iterated from a tuple snapshot (rebuilt when an agent joins or leaves, or the set is
    reordered in place); iterating over a snapshot makes adding or removing agents while looping safe.
    The model holds its agents strongly, so the snapshot never keeps a removed agent alive."""

    def __init__(self, agents: Iterable[mesa.Agent], random: Any = None) -> None:
        self._snapshot: Optional[tuple[mesa.Agent, ...]] = None
        self._index: Optional[tuple[tuple[mesa.Agent, ...], tuple[mesa.Agent, ...], dict[int, mesa.Agent]]] = None
        self._ids: Optional[tuple[tuple[mesa.Agent, ...], list[int], np.ndarray]] = None
        #: bumped whenever an agent joins or leaves or the set is reordered (a reader's caches key on it)
        self.changes = 0
        super().__init__(agents, random=random)

    def __iter__(self) -> Iterator[mesa.Agent]:
        return iter(self.snapshot())

    def snapshot(self) -> tuple[mesa.Agent, ...]:
        """The agents in the set's order, as a tuple (rebuilt only when the set changes)."""
        snap = self._snapshot
        if snap is None:
            snap = self._snapshot = tuple(AgentSet.__iter__(self))
        return snap

    def by_id(self) -> tuple[tuple[mesa.Agent, ...], dict[int, mesa.Agent]]:
        """The agents sorted by unique_id, and unique_id -> agent (rebuilt only when the set changes)."""
        snap = self.snapshot()
        index = self._index
        if index is None or index[0] is not snap:
            ordered = tuple(sorted(snap, key=_by_id))
            index = self._index = (snap, ordered, {a.unique_id: a for a in ordered})
        return index[1], index[2]

    def ids(self) -> tuple[list[int], np.ndarray]:
        """The agents' unique_ids, sorted, as a list and as an int64 array (rebuilt only when the set changes)."""
        ordered, _ = self.by_id()
        cached = self._ids
        if cached is None or cached[0] is not ordered:
            ids = list(map(_by_id, ordered))
            cached = self._ids = (ordered, ids, np.fromiter(ids, dtype=np.int64, count=len(ids)))
        return cached[1], cached[2]

    def _changed(self) -> None:
        self._snapshot = None
        self.changes += 1

    def add(self, agent: mesa.Agent) -> None:
        super().add(agent)
        self._changed()

    def discard(self, agent: mesa.Agent) -> None:
        super().discard(agent)
        self._changed()

    def remove(self, agent: mesa.Agent) -> None:
        super().remove(agent)
        self._changed()

    def shuffle(self, inplace: bool = False) -> AgentSet:
        out = super().shuffle(inplace=inplace)
        if inplace:
            self._changed()
        return out

    def sort(self, key: Callable[[mesa.Agent], Any] | str, ascending: bool = False, inplace: bool = False) -> AgentSet:
        out = super().sort(key, ascending=ascending, inplace=inplace)
        if inplace:
            self._changed()
        return out

    def select(self, filter_func: Optional[Callable[[mesa.Agent], bool]] = None, at_most: int | float = math.inf,
               inplace: bool = False, agent_type: Optional[type[mesa.Agent]] = None) -> AgentSet:
        out = super().select(filter_func, at_most=at_most, inplace=inplace, agent_type=agent_type)
        if inplace:
            self._changed()
        return out

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self.changes = getattr(self, "changes", 0) + 1
        self._snapshot = None
        self._index = None
        self._ids = None

    def __copy__(self) -> AgentSet:
        """A plain AgentSet of the same agents (`select()` with no filter copies): a copy keeps no
        cached tuple, so it never holds an agent the model has removed."""
        return AgentSet(self.snapshot(), self.random)


class Entrants:
    """The agents not yet handed to the store, with the tick each joined (`SocietyModel.take_joined`).

    One that leaves before the store hears of it is kept as its profile only (`profile(agent, tick)`), so the model
    never holds an agent that has left.
    """

    def __init__(self, profile: Callable[[Any, int], dict[str, Any]]) -> None:
        self._profile = profile
        self._pending: dict[int, tuple[Any, int]] = {}  # unique_id -> (agent or its profile, tick joined)

    def joined(self, agent: mesa.Agent, tick: int) -> None:
        """`agent` joined at `tick`."""
        self._pending[agent.unique_id] = (agent, tick)

    def left(self, agent: mesa.Agent) -> None:
        """`agent` left: if the store has not heard of it, keep who it was."""
        pending = self._pending.get(agent.unique_id)
        if pending is not None and pending[0] is agent:
            self._pending[agent.unique_id] = (self._profile(agent, pending[1]), pending[1])

    def take(self) -> list[dict[str, Any]]:
        """The profiles of the agents that joined since the last call (in the order they joined)."""
        pending, self._pending = self._pending, {}
        return [self._profile(a, tick) if not isinstance(a, dict) else a for a, tick in pending.values()]

    def clear(self) -> None:
        """Forget every agent (the run is over)."""
        self._pending = {}
