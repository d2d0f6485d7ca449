"""Run a RunSpec end to end: build the scenario and its backends, step, commit every tick.

The run row says honestly how it ended: `finished`, `collapsed` (the world ended it) or
`failed` (with the reason); everything committed before a failure is kept.
"""

from __future__ import annotations

import importlib.metadata as md
import math
import signal
import platform
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from agents.scripted import ScriptedBackend
from sim.broker import Backend, DecisionBroker
from sim.contracts import RunSpec
from sim.model import SocietyModel, TickRecord
from sim.errors import UsageError
from sim.interrupts import Terminated, shielded, stop_signals
from sim.store import Store

Progress = Callable[[int, int, TickRecord], None]


class RunFailed(RuntimeError):
    """The run stopped with status `failed`; the message is the stored reason."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(reason)
        self.run_id = run_id
        self.reason = reason


class RunInterrupted(RunFailed):
    """The user stopped the run (Ctrl-C, SIGTERM, SIGHUP); stored as `failed` with reason `interrupted`.

    `exit_code` is the shell's convention: 128 + the signal number (130, 143, 129).
    """

    def __init__(self, run_id: str, reason: str, exit_code: int = 130) -> None:
        super().__init__(run_id, reason)
        self.exit_code = exit_code


@dataclass
class RunResult:
    """What a finished run reports."""

    run_id: str
    scenario: str
    status: str
    ticks: int
    metrics: dict[str, Optional[float]]
    reason: Optional[str] = None
    duration_s: float = 0.0
    fallbacks: int = 0

    def to_json(self) -> dict[str, Any]:
        """The `--json` object: final metrics are whole-run figures (see `societas scenarios`)."""
        return {"run_id": self.run_id, "scenario": self.scenario, "status": self.status,
                "ticks": self.ticks, "fallbacks": self.fallbacks, "metrics": self.metrics}


def versions() -> dict[str, str]:
    """Package versions recorded with every run."""
    out = {"python": platform.python_version()}
    for name in ("societas", "mesa", "sqlmodel", "torch", "transformers", "langchain-core"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return out


def horizon(spec: RunSpec, cls: type[SocietyModel]) -> int:
    return int(spec.config[cls.horizon_field])


def needs_llm(spec: RunSpec, cls: type[SocietyModel]) -> bool:
    """Whether any agent of this spec is played by the LLM backend."""
    population = spec.config.get("population")
    if population:
        return any((g.get("policy") or spec.policy) == "llm" for g in population)
    return spec.policy == "llm"


def needs_only_llm(spec: RunSpec) -> bool:
    """Whether every agent is played by the LLM (no scripted agent in the population)."""
    population = spec.config.get("population")
    if population:
        return all((g.get("policy") or spec.policy) == "llm" for g in population)
    return spec.policy == "llm"


def make_backends(spec: RunSpec, cls: type[SocietyModel], store: Store, *, cache_only: bool = False) -> dict[str, Backend]:
    """The scripted backend always; the LLM backend when some agent needs it."""
    backends: dict[str, Backend] = {"scripted": ScriptedBackend(cls.strategies)}
    if needs_llm(spec, cls):
        from agents.llm.factory import make_llm_backend

        backends["llm"] = make_llm_backend(spec, store, cache_only=cache_only)
    return backends


def execute(
    spec: RunSpec,
    store: Store,
    *,
    progress: Optional[Progress] = None,
    backends: Optional[Mapping[str, Backend]] = None,
    cache_only: bool = False,
    origin: str = "run",
    parent_id: Optional[str] = None,
    sweep_id: Optional[str] = None,
    stop_after: Optional[int] = None,
    plan: Any = None,
) -> RunResult:
    """Run `spec` to its end, committing each tick; raise RunFailed if it fails.

    `plan` (sim.resume: resume and fork) takes over the run row and the first ticks: it claims
    or creates the row, replays committed ticks (checked, not stored again) and swaps the config.
    """
    from scenarios import get_scenario

    cls = get_scenario(spec.scenario)
    config = cls.Config.model_validate(spec.config)
    # built before the run row: a chat model that cannot be imported or built is bad input, not a failed run
    backends = dict(backends) if backends is not None else make_backends(spec, cls, store, cache_only=cache_only)
    used = sorted({p for p in backends if p != "scripted" or not needs_only_llm(spec)})
    if plan is not None:
        run_id = plan.open(store, spec, versions(), "+".join(used))
    else:
        run_id = store.create_run(spec, versions(), origin=origin, parent_id=parent_id, sweep_id=sweep_id,
                                  backends="+".join(used))
    started = time.perf_counter()
    total = horizon(spec, cls)
    model: Optional[SocietyModel] = None
    with stop_signals():  # held while the store writes (sim.interrupts), raised anywhere else
        try:
            for b in backends.values():
                if hasattr(b, "bind"):
                    b.bind(run_id, spec)
            tick_started = [time.perf_counter()]

            def commit(record: TickRecord) -> None:
                with shielded():  # a tick is committed whole or not at all, and the engine is never left locked
                    calls = [c for b in backends.values() if hasattr(b, "drain_calls") for c in b.drain_calls()]
                    now = time.perf_counter()
                    if plan is None or plan.commit(record, calls):  # a plan's replayed ticks are checked, not stored
                        store.record_tick(run_id, record, calls, duration_s=now - tick_started[0])
                    tick_started[0] = now
                if progress is not None:
                    progress(record.tick, total, record)

            model = cls(plan.first_config(config) if plan is not None else config, seed=spec.seed,
                        broker=DecisionBroker(backends), policy=spec.policy, on_tick=commit,
                        contract=spec.contract)
            if plan is not None:
                plan.attach(model, backends)
            last = total if stop_after is None else min(total, stop_after)
            while model.running and model.tick < last:
                model.step()
        except (KeyboardInterrupt, Terminated) as exc:
            signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
            reason = "interrupted" if signum == signal.SIGINT else f"interrupted ({signal.Signals(signum).name})"
            with shielded(then_raise=False):  # a second Ctrl-C while recording the first is the same request
                store.finish_run(run_id, "failed", reason, time.perf_counter() - started, _summary(model))
            raise RunInterrupted(run_id, reason, 128 + int(signum)) from None
        except UsageError:
            # found bad before anything was committed: bad input, nothing kept (a resumed or forked row is never dropped)
            with shielded(then_raise=False):
                if plan is None and store.get_run(run_id).ticks == 0:
                    store.delete_run(run_id)
                    raise
                store.finish_run(run_id, "failed", "bad input found mid-run", time.perf_counter() - started, _summary(model))
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is recorded, then reported
            reason = f"{type(exc).__name__}: {exc}"
            with shielded(then_raise=False):
                store.finish_run(run_id, "failed", reason, time.perf_counter() - started, _summary(model))
            raise RunFailed(run_id, reason) from exc
        cut_short = stop_after is not None and model.running and model.tick < total  # ended by stop_after, not the world
        status = model.status if model.status != "running" else ("stopped" if cut_short else "finished")
        duration = time.perf_counter() - started + (plan.earlier_duration if plan is not None else 0.0)
        final = _summary(model)
        reason = model.reason or (f"stopped after tick {model.tick} of {total} on request" if status == "stopped" else None)
        with shielded(then_raise=False):  # every tick is in: a Ctrl-C now is too late to stop anything
            store.finish_run(run_id, status, reason, duration, final)
    return RunResult(run_id, spec.scenario, status, model.tick, final, reason, duration, model.fallbacks)


def _summary(model: Optional[SocietyModel]) -> dict[str, Optional[float]]:
    """The run's final metrics as strict-JSON data: a non-finite value is reported as null."""
    if model is None or model.tick == 0:
        return {}
    try:
        raw = model.summary()
    except Exception:  # noqa: BLE001 - a failed run still keeps its committed ticks
        return {}
    return {k: (float(v) if v is not None and math.isfinite(float(v)) else None) for k, v in raw.items()}
