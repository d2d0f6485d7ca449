"""The decision broker: one batch per backend per phase, every answer checked against its space.

Backends (`sim.contracts.backend.Backend`) answer `decide_batch(requests) -> decisions` (same order),
or a whole RequestBatch with `decide_columns`. The broker never lets an out-of-space value reach
the world: it replaces it with the request's default and marks the decision `fallback=True` with
the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Callable, Optional

from sim.contracts.backend import Backend, fallback_decision
from sim.core.contracts import Decision, DecisionColumns, DecisionRequest, RequestBatch
from sim.core.errors import UsageError
from sim.core.spaces import SpaceError


class DecisionBroker:
    """Routes requests to backends by `request.backend` and validates the answers."""

    def __init__(self, backends: Mapping[str, Backend]) -> None:
        for name, backend in backends.items():
            if not isinstance(backend, Backend):
                missing = [m for m in ("name", "concurrent", "decide_batch", "decide_columns", "bind", "drain_calls")
                           if m not in dir(backend)]
                raise UsageError(f"backend {name!r} ({type(backend).__name__}) does not implement sim.contracts.backend.Backend "
                                 f"(it lacks {', '.join(missing)}): subclass Backend, which declares the optional hooks")
        self.backends = dict(backends)

    def decide(self, requests: Sequence[DecisionRequest]) -> dict[int, Decision]:
        """Resolve a phase's requests: one `decide_batch` call per backend."""
        groups: dict[str, list[DecisionRequest]] = {}
        for request in requests:
            groups.setdefault(request.backend, []).append(request)
        out: dict[int, Decision] = {}
        for name, answers in self._answer(groups).items():
            for request, decision in zip(groups[name], answers):
                out[request.agent_id] = self._checked(request, decision)
        return out

    def decide_all(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        """Resolve requests whose agent ids may repeat (a validity probe asks one agent of many models), one
        `decide_batch` call per backend, each answer checked against its space; the decisions in the requests' order."""
        positions: dict[str, list[int]] = {}
        for k, request in enumerate(requests):
            positions.setdefault(request.backend, []).append(k)
        groups = {name: [requests[k] for k in at] for name, at in positions.items()}
        out: list[Optional[Decision]] = [None] * len(requests)
        for name, answers in self._answer(groups).items():
            for k, request, decision in zip(positions[name], groups[name], answers):
                out[k] = self._checked(request, decision)
        return out  # type: ignore[return-value]

    def _answer(self, groups: Mapping[str, Sequence[DecisionRequest]]) -> dict[str, list[Decision]]:
        """Each backend's answers to its group of requests (one `decide_batch` each). Backends that wait on a server
        (`concurrent`: several served models) are all in flight at once, the others answer meanwhile in this thread;
        each backend's answers and call log are the same either way."""
        for name in groups:
            if name not in self.backends:
                raise KeyError(f"no backend {name!r}; available: {sorted(self.backends)}")
        served = [name for name in groups if self.backends[name].concurrent]
        answers: dict[str, list[Decision]] = {}
        if len(served) > 1:
            with ThreadPoolExecutor(max_workers=len(served), thread_name_prefix="societas-backend") as pool:
                futures = {name: pool.submit(self.backends[name].decide_batch, groups[name]) for name in served}
                for name in groups:
                    if name not in futures:
                        answers[name] = self.backends[name].decide_batch(groups[name])
                answers.update({name: future.result() for name, future in futures.items()})
        else:
            answers = {name: self.backends[name].decide_batch(group) for name, group in groups.items()}
        for name, group in groups.items():
            if len(answers[name]) != len(group):
                raise RuntimeError(f"backend {name!r} answered {len(answers[name])} of {len(group)} requests")
        return {name: answers[name] for name in groups}

    def decide_columns(self, batch: RequestBatch) -> DecisionColumns:
        """Resolve a RequestBatch (one backend's requests that share everything but who decides), in its order.

        A backend's `decide_columns(batch)` answers it whole, unless its `decide_batch` was replaced
        below it (a subclass's or an instance's own, which must be the one asked) or it returns None;
        then the batch's DecisionRequests go through `decide_batch`. Every value is checked
        against the batch's space as `decide` checks it: each distinct value once when the values
        are of one hashable type and all pass unchanged (the common case), else decision by
        decision.
        """
        backend = self.backends.get(batch.backend)
        if backend is None:
            raise KeyError(f"no backend {batch.backend!r}; available: {sorted(self.backends)}")
        answer = _columns_of(backend)
        columns = answer(batch) if answer is not None else None
        if columns is None:
            answers = backend.decide_batch(list(batch))
            if len(answers) != len(batch):
                raise RuntimeError(f"backend {batch.backend!r} answered {len(answers)} of {len(batch)} requests")
            columns = DecisionColumns.of(batch.phase, backend.name, answers)
        if len(columns) != len(batch):
            raise RuntimeError(f"backend {batch.backend!r} answered {len(columns)} of {len(batch)} requests")
        if self._all_pass(batch, columns.values):
            return columns
        values, special = list(columns.values), dict(columns.special)
        for i in range(len(values)):
            decision = columns[i]
            checked = self._checked(batch[i], decision)
            if checked is not decision:
                values[i] = checked.value
                special[i] = checked
        return DecisionColumns(columns.phase, columns.backend, columns.agent_ids, values, special)

    @staticmethod
    def _all_pass(batch: RequestBatch, values: Sequence) -> bool:
        """Whether every value is in the batch's space as it is (same value, same type), checking each distinct one once."""
        try:
            kinds = set(map(type, values))
            if len(kinds) != 1:
                return False
            distinct = set(values)
        except TypeError:  # unhashable values: decision by decision
            return False
        kind = kinds.pop()
        for v in distinct:
            if v != v:  # NaN: never in a space, and not found again by a set
                return False
            try:
                checked = batch.space.validate(v)
            except SpaceError:
                return False
            if checked != v or type(checked) is not kind:
                return False
        return True

    @staticmethod
    def _checked(request: DecisionRequest, decision: Decision) -> Decision:
        try:
            value = request.space.validate(decision.value)
        except SpaceError as exc:
            return fallback_decision(request, decision.backend, f"invalid: {exc}", decision.attempts, decision.raw)
        return decision if value == decision.value and type(value) is type(decision.value) else replace(decision, value=value)


def _columns_of(backend: Backend) -> Optional[Callable[[RequestBatch], Optional[DecisionColumns]]]:
    """The backend's `decide_columns`, when it answers for the `decide_batch` in force: defined on the
    class that defines `decide_batch` or below it, and `decide_batch` not replaced on the instance."""
    answer = backend.decide_columns
    if not callable(answer):
        return None
    own = getattr(backend, "__dict__", {})
    if "decide_columns" in own:
        return answer
    if "decide_batch" in own:
        return None
    mro = type(backend).__mro__
    columns_at = next((c for c in mro if "decide_columns" in vars(c)), None)
    batch_at = next((c for c in mro if "decide_batch" in vars(c)), None)
    if columns_at is None or (batch_at is not None and not issubclass(columns_at, batch_at)):
        return None
    return answer
