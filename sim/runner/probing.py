"""Run a scenario's validity probes (`societas probe`): matched counterfactual requests, one batch, one verdict each.

For each probe (sim.tick.probe) and each seed, a fresh model is put at each level of the probed
variable; the requests of one seed differ only in that variable (same agent, same decision seed).
Every request of a probe goes to the backends a study would use (the LLM behind the store's cache)
in one batch. Per probe the report gives the mean response at each level and the effect: the
paired difference, last level minus first, over seeds, with its 95% interval
(`sim.reward.intervals`). A probe *responds* when the interval excludes 0; a decision that never
changed at all is said so.

The probe is stored as a run of origin `probe` (one tick per probe: its figures as the tick's metrics,
every decision as an agent step, every LLM call with its prompt), so a rerun is answered from the
cache and `show` lists it; it has no world to replay, resume or fork.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from scenarios.registry import get_scenario
from sim.core.backend import Backend
from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from sim.core.interrupts import Terminated, shielded, stop_signals
from sim.core.records import AgentStepRecord, TickRecord
from sim.core.spec import RunSpec
from sim.reward.intervals import mean_interval
from sim.runner.backends import make_backends
from sim.runner.config import validate_config
from sim.runner.execution import RunFailed, RunInterrupted, versions
from sim.runner.limits import DEFAULT_SEEDS, MAX_SEEDS, MIN_SEEDS
from sim.store.store import Store
from sim.tick.broker import DecisionBroker
from sim.tick.probe import Probe

ORIGIN = "probe"


@dataclass
class ProbeResult:
    """One probe's verdict: mean response per level, the paired effect (last - first) and its interval."""

    name: str
    variable: str
    response: str
    finding: str
    levels: list[Any]
    means: list[Optional[float]]
    seeds: int  # matched seeds in the verdict (a seed with a fallback answer at any level is left out)
    effect: Optional[float]
    lo: Optional[float]
    hi: Optional[float]
    method: Optional[str]
    responds: bool  # the interval of the effect excludes 0
    varied: bool  # some decision differed from another at all
    fallbacks: int  # decisions replaced by the scenario's default (unparsable answers)
    responses: list[list[Optional[float]]] = field(default_factory=list, repr=False)  # per level, per seed (None: fallback)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "responses"}


@dataclass
class ProbeReport:
    run_id: str
    scenario: str
    policy: str
    results: list[ProbeResult]
    duration_s: float

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "scenario": self.scenario, "policy": self.policy, "duration_s": self.duration_s,
                "probes": [r.to_json() for r in self.results]}


def choose_probes(cls: type, names: Sequence[str]) -> list[Probe]:
    """The scenario's probes named (all when none named); UsageError for a scenario without probes or an unknown name."""
    probes = list(getattr(cls, "probes", ()) or ())
    if not probes:
        raise UsageError(f"scenario {getattr(cls, 'name', cls.__name__)!r} declares no validity probes "
                         "(see docs/probes.md to add one)")
    known = {p.name: p for p in probes}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"unknown probe {unknown[0]!r}; this scenario has: {', '.join(known)}")
    return [known[n] for n in dict.fromkeys(names)] if names else probes


def _verdict(probe: Probe, responses: list[list[Optional[float]]], fallbacks: int) -> ProbeResult:
    """Means per level and the paired effect over the seeds whose every answer was the model's (not a fallback).

    The interval of the differences is a percentile bootstrap of their mean, symmetric in sign (never Wilson:
    differences are not 0/1 outcomes)."""
    kept = [s for s in range(len(responses[0])) if all(level[s] is not None for level in responses)]
    rows = [[level[s] for s in kept] for level in responses]
    diffs = [b - a for a, b in zip(rows[0], rows[-1])]
    ci = mean_interval(diffs, rate=False)
    lo, hi = ci["lo"], ci["hi"]
    flat = {x for level in rows for x in level}
    return ProbeResult(
        name=probe.name, variable=probe.variable, response=probe.response, finding=probe.finding,
        levels=list(probe.levels), means=[sum(r) / len(r) if r else None for r in rows], seeds=len(kept),
        effect=ci["mean"],
        lo=lo, hi=hi, method=ci["method"], responds=lo is not None and (lo > 0 or hi < 0), varied=len(flat) > 1,
        fallbacks=fallbacks, responses=responses)


def plan_probes(spec: RunSpec, names: Sequence[str] = (), seeds: int = DEFAULT_SEEDS) -> tuple[type, list[Probe], list[Any]]:
    """(scenario class, the probes, each probe's config) for `spec`; UsageError for bad input, before anything runs."""
    if not isinstance(seeds, int) or isinstance(seeds, bool) or not MIN_SEEDS <= seeds <= MAX_SEEDS:
        raise UsageError(f"--seeds (seeds=) must be a whole number from {MIN_SEEDS} to {MAX_SEEDS:,} (fewer seeds give no usable "
                         f"interval); got {seeds!r}")
    cls = get_scenario(spec.scenario)
    probes = choose_probes(cls, names)
    configs = [validate_config(cls.Config, {**spec.config, **dict(p.config)}) for p in probes]
    for probe, config in zip(probes, configs):  # a world the probe cannot be set up in is bad input, found here
        for level in probe.levels:
            _situate(cls, probe, config, spec, spec.seed, level)
    return cls, probes, configs


def _situate(cls: type, probe: Probe, config: Any, spec: RunSpec, seed: int, level: Any,
             broker: Optional[DecisionBroker] = None) -> DecisionRequest:
    """`probe`'s request at `level` in a fresh model of `seed`; UsageError when the probe cannot be set up there."""
    try:
        model = cls(config, seed=seed, broker=broker or DecisionBroker({}), policy=spec.policy, contract=spec.contract)
        request = probe.situate(model, level)
        model.release()  # (thousands of models: each is freed once its request is made)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - a world the probe does not fit (too few agents, businesses, ...)
        raise UsageError(f"probe {probe.name} cannot be set up at {probe.variable} = {level!r} with this config: "
                         f"{type(exc).__name__}: {exc}") from None
    if request is None:
        raise UsageError(f"probe {probe.name} made no request at {probe.variable} = {level!r} (with this config, seed {seed})")
    return request


def run_probes(spec: RunSpec, store: Store, *, names: Sequence[str] = (), seeds: int = DEFAULT_SEEDS,
               backends: Optional[Mapping[str, Backend]] = None,
               progress: Optional[Callable[[int, int, Any], None]] = None) -> ProbeReport:
    """Run the probes `names` (default: all) of `spec`'s scenario, `seeds` seeds per level from `spec.seed` on,
    decided by `spec`'s policy through `backends` (default: those a run of `spec` uses, behind the store's
    cache); store them as one run of origin `probe` and return the report."""
    cls, probes, configs = plan_probes(spec, names, seeds)
    backends = dict(backends) if backends is not None else make_backends(spec, cls, store)
    broker = DecisionBroker(backends)
    used = "+".join(sorted(p for p in backends if p in spec.policies()))
    started = time.perf_counter()
    run_id = store.create_run(spec, versions(), origin=ORIGIN, backends=used)
    store.set_initial(run_id, {})  # a probe starts from no world: nothing for the app to rebuild
    results: list[ProbeResult] = []
    try:
        with stop_signals():  # Ctrl-C, SIGTERM, SIGHUP: stored as failed, the exit code says which
            for b in backends.values():
                b.bind(run_id, spec)
            for tick, (probe, config) in enumerate(zip(probes, configs), start=1):
                t0 = time.perf_counter()
                result, steps = _ask(cls, probe, config, spec, seeds, broker)
                results.append(result)
                metrics = {"effect": result.effect, "effect_lo": result.lo, "effect_hi": result.hi,
                           "responds": float(result.responds), "fallbacks": float(result.fallbacks),
                           **{f"mean_at_level_{i + 1}": m for i, m in enumerate(result.means)}}
                state = {"probe": probe.name, "config": dict(probe.config), "seeds_asked": seeds, **result.to_json()}
                record = TickRecord(tick, metrics, state, steps, [])
                with shielded():  # a probe is stored whole or not at all
                    calls = [c for b in backends.values() for c in b.drain_calls()]
                    store.record_tick(run_id, record, calls, duration_s=time.perf_counter() - t0)
                if progress is not None:
                    progress(tick, len(probes), record)
    except (KeyboardInterrupt, Terminated) as exc:
        signum = exc.signum if isinstance(exc, Terminated) else signal.SIGINT
        reason = f"interrupted ({signal.Signals(signum).name})"
        with shielded(then_raise=False):
            store.finish_run(run_id, "failed", reason, time.perf_counter() - started, {})
        raise RunInterrupted(run_id, reason, 128 + int(signum)) from None
    except Exception as exc:  # noqa: BLE001 - every failure is recorded, then reported
        reason = f"{type(exc).__name__}: {exc}"
        with shielded(then_raise=False):
            store.finish_run(run_id, "failed", reason, time.perf_counter() - started, {})
        if isinstance(exc, UsageError):
            raise
        raise RunFailed(run_id, reason) from exc
    final: dict[str, Any] = {}
    for r in results:
        final.update({f"{r.name}.effect": r.effect, f"{r.name}.effect_lo": r.lo, f"{r.name}.effect_hi": r.hi,
                      f"{r.name}.responds": float(r.responds)})
    duration = time.perf_counter() - started
    with shielded(then_raise=False):
        store.finish_run(run_id, "finished", None, duration, final)
    return ProbeReport(run_id, spec.scenario, spec.policy, results, duration)


def _ask(cls: type, probe: Probe, config: Any, spec: RunSpec, seeds: int,
         broker: DecisionBroker) -> tuple[ProbeResult, list[AgentStepRecord]]:
    """Every level x seed request of `probe` in one batch; the verdict and the decisions as agent steps."""
    asked = [(li, s, _situate(cls, probe, config, spec, spec.seed + s, level, broker))
             for li, level in enumerate(probe.levels) for s in range(seeds)]
    # each request gets an id of its own: the same agent of different models would collide in one batch
    decided = broker.decide([dataclasses.replace(r, agent_id=k) for k, (_, _, r) in enumerate(asked)])
    responses: list[list[Optional[float]]] = [[None] * seeds for _ in probe.levels]
    steps = []
    fallbacks = 0
    for k, (li, s, request) in enumerate(asked):
        d = decided[k]
        value = probe.measure(d.value, request)
        # a replaced answer is the scenario's default, not the model's: its seed is left out of the verdict
        responses[li][s] = None if d.fallback else value
        fallbacks += d.fallback
        action = {request.phase: d.value, "level": probe.levels[li], "seed": spec.seed + s, "agent": request.agent_id}
        steps.append(AgentStepRecord(k, action, value, value, d.fallback, d.backend, d.reason, None))
    return _verdict(probe, responses, fallbacks), steps


def refuse_probe_run(run: Any, verb: str) -> None:
    """A probe run holds matched decisions, not a world's ticks: UsageError for replay, resume and fork."""
    if getattr(run, "origin", None) == ORIGIN:
        raise UsageError(f"run {run.id} is a validity probe (societas probe): it has no world to {verb}; "
                         f"run the probe again (its LLM answers come from the cache)")
