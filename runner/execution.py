"""Run a RunSpec end to end: build the scenario and its backends, step, commit every tick.

The run row says honestly how it ended: `finished`, `collapsed` (the world ended it) or
`failed` (with the reason); everything committed before a failure is kept.
"""

from __future__ import annotations

import functools
import importlib.metadata as md
import math
import platform
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional

from agents.llm.archetypes import run_stats as archetype_stats
from runner.backends import make_backends
from runner.config import bind
from runner.data import DATA_KEY, data_fingerprints
from runner.plans import FreshRun, RunPlan
from sim.contracts.backend import Backend
from sim.core.errors import UsageError
from sim.core.interrupts import Terminated, shielded, stop_signals
from sim.core.records import TickRecord
from sim.core.rng import SeedStream
from sim.core.spec import RunSpec
from sim.store.store import Store
from sim.tick.broker import DecisionBroker
from sim.tick.model import SocietyModel

Progress = Callable[[int, int, TickRecord], None]


class RunFailed(RuntimeError):
    """The run stopped with status `failed`; the message is the stored reason."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(reason)
        self.run_id = run_id
        self.reason = reason


class RunInterrupted(RunFailed):
    """The user stopped the run (Ctrl-C, SIGTERM, SIGHUP); stored as `failed` with reason `interrupted (SIGINT)`
    (or SIGTERM, SIGHUP).

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


def versions() -> dict[str, Any]:
    """Package versions recorded with every run (a copy: the caller may add to it)."""
    return dict(_versions())


@functools.lru_cache(maxsize=1)
def _versions() -> dict[str, Any]:
    """Read once a process: each package's metadata is parsed from disk (~2 ms a package; a 50-month fishery runs
    in ~60 ms, so a sweep or an env's episodes paid it again and again), and the code already imported is the
    version that runs, whatever is installed meanwhile."""
    out: dict[str, Any] = {"python": platform.python_version()}
    for name in ("societas", "mesa", "sqlmodel", "torch", "transformers", "langchain-core"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            pass
    return out


def horizon(spec: RunSpec, cls: Optional[type[SocietyModel]] = None) -> int:
    """How many ticks the run has at most (its scenario's `horizon_field`; `cls`: the scenario, where the caller has
    looked it up, else the bound spec's)."""
    return int(spec.config[(cls or bind(spec).scenario_class).horizon_field])


def execute(spec: RunSpec, store: Store, plan: Optional[RunPlan] = None, *, backends: Optional[Mapping[str, Backend]] = None,
            progress: Optional[Progress] = None, stop_after: Optional[int] = None) -> RunResult:
    """Run `spec` to its end (or its tick `stop_after`), committing each tick; raise RunFailed if it fails.

    `spec` is trusted as `build_spec` bound it (a spec made another way is bound here, once: its config and
    population checked as a config file's are, bad input before any write). `plan` says how the run starts
    (runner.plans): a fresh row by default; a resumed or forked one replays its committed ticks first.
    `backends` default to those the spec needs, behind the store's LLM cache; `progress(tick, total, record)`
    is called after every committed tick.
    """
    plan = plan if plan is not None else FreshRun()
    spec = bind(spec)
    cls, config = spec.scenario_class, spec.settings
    # built before the run row: a chat model that cannot be imported or built is bad input, not a failed run
    backends = dict(backends) if backends is not None else make_backends(spec, cls, store)
    broker = DecisionBroker(backends)  # refuses a backend that does not implement the protocol: nothing stored
    used = "+".join(sorted(p for p in backends if p in spec.policies()))
    made_with = versions()
    data = data_fingerprints(config)
    if data:  # the data files it reads: replay, resume and fork check they are unchanged
        made_with[DATA_KEY] = data
    run_id = plan.open(store, spec, made_with, used)
    started = time.perf_counter()
    total = horizon(spec, cls)
    model: Optional[SocietyModel] = None
    with stop_signals():  # held while the store writes (sim.core.interrupts), raised anywhere else
        try:
            for b in backends.values():
                b.bind(run_id, spec)
            tick_started = [time.perf_counter()]

            def commit(record: TickRecord) -> None:
                with shielded():  # a tick is committed whole or not at all, and the engine is never left locked
                    calls = [c for b in backends.values() for c in b.drain_calls()]
                    now = time.perf_counter()
                    if plan.commit(record):  # a replayed tick is checked, not stored again
                        store.record_tick(run_id, record, calls, duration_s=now - tick_started[0])
                    store.add_agents(run_id, model.take_joined())  # (idempotent: a replayed tick's are there)
                    tick_started[0] = now
                if progress is not None:
                    progress(record.tick, total, record)

            model = cls(plan.first_config(config), seed=spec.seed, broker=broker, policy=spec.policy,
                        on_tick=commit, contract=spec.contract, population=spec.population)
            if spec.rollout is not None:  # a rollout's decisions after its branch tick draw seeds of their own
                model.seeds = SeedStream(spec.seed, model.profile.rng, tuple(spec.rollout))
            plan.attach(model)
            store.set_initial(run_id, model.initial_state())
            store.add_agents(run_id, model.take_joined())  # who takes part, before tick 1 (which may fail)
            last = total if stop_after is None else min(total, stop_after)
            while model.running and model.tick < last:
                model.step()
        except (KeyboardInterrupt, Terminated) as exc:
            signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
            reason = f"interrupted ({signal.Signals(signum).name})"
            with shielded(then_raise=False):  # a second Ctrl-C while recording the first is the same request
                store.finish_run(run_id, "failed", reason, time.perf_counter() - started, final_summary(model))
            raise RunInterrupted(run_id, reason, 128 + int(signum)) from None
        except UsageError:
            # found bad before anything was committed: bad input, nothing kept (unless the plan keeps its row)
            with shielded(then_raise=False):
                if plan.drop_if_bad_input and store.get_run(run_id).ticks == 0:
                    store.delete_run(run_id)
                    raise
                store.finish_run(run_id, "failed", "bad input found mid-run", time.perf_counter() - started, final_summary(model))
            raise
        except Exception as exc:  # noqa: BLE001 - every failure is recorded, then reported
            reason = f"{type(exc).__name__}: {exc}"
            with shielded(then_raise=False):
                store.finish_run(run_id, "failed", reason, time.perf_counter() - started, final_summary(model))
            raise RunFailed(run_id, reason) from exc
        cut_short = stop_after is not None and model.running and model.tick < total  # ended by stop_after, not the world
        status = model.status if model.status != "running" else ("stopped" if cut_short else "finished")
        duration = time.perf_counter() - started + plan.earlier_duration
        final = {**final_summary(model), **archetype_stats(list(backends.values()))}
        reason = model.reason or (f"stopped after tick {model.tick} of {total} on request" if status == "stopped" else None)
        with shielded(then_raise=False):  # every tick is in: a Ctrl-C now is too late to stop anything
            store.finish_run(run_id, status, reason, duration, final)
    result = RunResult(run_id, spec.scenario, status, model.tick, final, reason, duration, model.fallbacks)
    model.release()  # a process that runs many (a sweep worker) frees each model after its run
    return result


def final_summary(model: Optional[SocietyModel]) -> dict[str, Optional[float]]:
    """The run's final metrics as strict-JSON data: a non-finite value is reported as null."""
    if model is None or model.tick == 0:
        return {}
    try:
        raw = model.summary()
    except Exception:  # noqa: BLE001 - a failed run still keeps its committed ticks
        return {}
    return {k: (float(v) if v is not None and math.isfinite(float(v)) else None) for k, v in raw.items()}
