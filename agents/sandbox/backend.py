"""The `synthesis` backend: answers each request by running the program the request names, in the sandbox.

A scenario that supports policy synthesis puts in each request's observation: `program` (`{"id", "code",
"api"}`, or None while there is none), the episode's fixed data (`static`), this step's `state`, `index`
(agent id -> the program's agent number), `actions` (the action names, by number), `episode` and `limits`.
Requests of one step share one observation, so the backend sends the state once and runs the program for
all of them in one round trip. One sandbox lives per program and episode (a new episode starts a fresh
process with fresh CPU time).

An answer that is not an action becomes the request's default with `fallback=True` and a reason that
starts with its kind: `error:` (the call raised, or returned something that is no action), `hack (...)`
(it wrote to its observation), `stopped (timeout|cpu|memory|violation|crash):` (the program is stopped for
the rest of the episode), `no program:`. Values are returned as action names; the broker checks them
against the space like any backend's.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any, Optional

from agents.sandbox.process import Limits, Sandbox
from sim.contracts.backend import Backend, fallback_decision
from sim.core.contracts import Decision, DecisionColumns, DecisionRequest, RequestBatch


class CodeBackend(Backend):
    """Runs synthesised programs for the `synthesis` policy (see the module's docstring)."""

    name = "synthesis"

    def __init__(self, isolation: Optional[str] = None) -> None:
        self.isolation = isolation
        self._boxes: dict[tuple[Any, Any], Sandbox] = {}
        self._loaded: dict[tuple[Any, Any], Optional[str]] = {}
        weakref.finalize(self, _close_all, self._boxes)

    # ----- the Backend contract ---------------------------------------------------------------------------
    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        out: list[Optional[Decision]] = [None] * len(requests)
        groups: dict[int, list[int]] = {}
        for k, r in enumerate(requests):
            groups.setdefault(id(r.observation.get("state")), []).append(k)
        for positions in groups.values():
            first = requests[positions[0]]
            got = self._run(first.observation, [requests[k].agent_id for k in positions], [requests[k].seed for k in positions])
            for k, (value, reason) in zip(positions, got):
                r = requests[k]
                out[k] = (Decision(r.agent_id, r.phase, value, self.name) if reason is None
                          else fallback_decision(r, self.name, reason))
        return out  # type: ignore[return-value]

    def decide_columns(self, batch: RequestBatch) -> DecisionColumns:
        got = self._run(batch.observation, list(batch.agent_ids), [int(s) for s in batch.seeds])
        values, special = [], {}
        for k, (value, reason) in enumerate(got):
            if reason is None:
                values.append(value)
            else:
                values.append(batch.default)
                special[k] = Decision(batch.agent_ids[k], batch.phase, batch.default, self.name, fallback=True, reason=reason)
        return DecisionColumns(batch.phase, self.name, batch.agent_ids, values, special)

    # ----- running ------------------------------------------------------------------------------------------
    def _run(self, obs: dict[str, Any], agent_ids: list[int], seeds: list[int]) -> list[tuple[Any, Optional[str]]]:
        """(value, None) or (None, fallback reason) for each agent."""
        program = obs.get("program")
        if not program:
            return [(None, "no program: no accepted policy yet")] * len(agent_ids)
        box, why = self._box(program, obs)
        if why is not None:
            return [(None, why)] * len(agent_ids)
        index = obs["index"]
        result = box.step(obs["state"], [int(index[a]) for a in agent_ids], [s & 0x7FFFFFFF for s in seeds])
        names = obs["actions"]
        out: list[tuple[Any, Optional[str]]] = []
        for k, value in enumerate(result.actions):
            if k in result.tamper:
                out.append((None, f"hack ({result.tamper[k].split(':')[0]}): {result.tamper[k]}"))
            elif k in result.errors:
                out.append((None, f"error: {result.errors[k]}"))
            elif result.stopped is not None and value is None:
                out.append((None, f"stopped ({result.kind}): {result.stopped}"))
            elif isinstance(value, int):
                out.append((names[value], None) if 0 <= value < len(names)
                           else (None, f"error: returned {value}, not an action number 0-{len(names) - 1}"))
            elif isinstance(value, str):
                out.append((value, None))
            else:
                out.append((None, "error: returned no action"))
        return out

    def _box(self, program: dict[str, Any], obs: dict[str, Any]) -> tuple[Sandbox, Optional[str]]:
        key = (program["id"], obs.get("episode"))
        box = self._boxes.get(key)
        if box is None:
            for old in list(self._boxes):
                self._boxes.pop(old).close()
            limits = obs.get("limits") or {}
            box = Sandbox(program["code"], program["api"], Limits(memory_mb=int(limits.get("memory_mb", 512)),
                          cpu_s=int(limits.get("cpu_s", 60)), step_s=float(limits.get("step_s", 2.0))),
                          isolation=self.isolation)
            self._boxes[key] = box
            why = box.start() or box.reset(obs["static"])
            self._loaded[key] = None if why is None else f"stopped ({box.kind}): {why}"
        return box, self._loaded.get(key)

    def close(self) -> None:
        """End every sandbox (a run's end; also done when the backend is collected)."""
        _close_all(self._boxes)


def _close_all(boxes: dict) -> None:
    for box in list(boxes.values()):
        box.close()
    boxes.clear()
