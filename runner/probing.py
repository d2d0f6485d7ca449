"""Run a scenario's validity probes (`societas probe`): matched counterfactual requests, one batch, one verdict each.

For each probe (sim.tick.probe) and each seed, a fresh model is put at each level of the probed
variable; the requests of one seed differ only in that variable (same agent, same decision seed, same
action space). Every request of a probe goes to the backends a study would use (the LLM behind the
store's cache) in one batch. Per probe the report gives the mean response at each level and the effect:
the paired difference, last level minus first, over seeds, with its 95% interval (`sim.reward.intervals`:
a percentile bootstrap of the mean difference; Newcombe's paired interval from Wilson's for a 0/1
response). A probe *responds* when the interval excludes 0; a decision that never changed is said so.

The instrument is checked every time it is used: the probe's two controls (sim.tick.probe.Control)
answer the very same requests, and the verdict is `valid` only when the blind one reads "does not
respond" and the one that follows reads "responds". With `paraphrases=K` the probed policy also answers
under K rewordings of the prompt's instructions that keep its facts (runner.paraphrase); the report
gives the effect under each wording, its spread, and whether the verdict flips.

The probe is stored as a run of origin `probe` (one tick per probe: its figures as the tick's metrics,
every decision of the probed policy as an agent step, every LLM call with its prompt), so a rerun is
answered from the cache and `show` lists it; it has no world to replay, resume or fork.
"""

from __future__ import annotations

import dataclasses
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from agents.llm.backend import LLMBackend
from agents.llm.cache import CachedBackend
from agents.scripted import ScriptedBackend
from runner.backends import make_backends
from runner.config import validate_config
from runner.execution import RunFailed, RunInterrupted, versions
from runner.limits import DEFAULT_SEEDS, MAX_SEEDS, MIN_SEEDS
from runner.paraphrase import MAX_PARAPHRASES, RewordedSystem, Wording, reword_question, wordings
from scenarios.registry import get_scenario
from sim.contracts.backend import Backend
from sim.core.contracts import Decision, DecisionRequest
from sim.core.errors import UsageError
from sim.core.interrupts import Terminated, shielded, stop_signals
from sim.core.records import AgentStepRecord, TickRecord
from sim.core.spec import RunSpec
from sim.reward.intervals import mean_interval, paired_rate_difference
from sim.store.store import Store
from sim.tick.broker import DecisionBroker
from sim.tick.probe import Control, Probe, enter_first_tick

ORIGIN = "probe"
#: the strategy name under which a control answers (a ScriptedBackend of its own)
CONTROL = "probe-control"


@dataclass
class Reading:
    """What one policy's decisions on a probe's requests say: means per level, the paired effect, the verdict."""

    means: list[Optional[float]]
    level_lo: list[Optional[float]]  # each level's 95% interval (Wilson for a 0/1 response)
    level_hi: list[Optional[float]]
    seeds: int  # matched seeds in the verdict (a seed with a fallback answer at any level is left out)
    effect: Optional[float]
    lo: Optional[float]
    hi: Optional[float]
    method: Optional[str]
    responds: bool  # the interval of the effect excludes 0
    varied: bool  # some decision differed from another at all
    fallbacks: int  # decisions replaced by the scenario's default (unparsable answers)
    responses: list[list[Optional[float]]] = field(default_factory=list, repr=False)  # per level, per seed (None: fallback)

    def verdict(self) -> str:
        """"yes", "no", "no (never changed)" or "no usable answer" (every seed had a fallback)."""
        return _verdict(self.responds, self.varied, self.seeds)

    def figures(self) -> dict[str, Any]:
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "responses"}


@dataclass
class ProbeResult:
    """One probe's verdict: the probed policy's reading, its controls' readings, and its readings under rewordings."""

    name: str
    variable: str
    response: str
    finding: str
    unforced: str  # why the request's bounds cannot make the response move
    levels: list[Any]
    means: list[Optional[float]]
    level_lo: list[Optional[float]]
    level_hi: list[Optional[float]]
    seeds: int
    effect: Optional[float]
    lo: Optional[float]
    hi: Optional[float]
    method: Optional[str]
    responds: bool
    varied: bool
    fallbacks: int
    #: "blind" and "follows": each control's reading ({"does", figures..., "ok"})
    controls: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: both controls read as they must (blind: does not respond; follows: responds)
    valid: bool = True
    #: per wording (0 = the original), with --paraphrases: {"wording", "reworded", figures...}
    wordings: list[dict[str, Any]] = field(default_factory=list)
    #: some rewording's verdict differs from the original's
    flips: bool = False
    responses: list[list[Optional[float]]] = field(default_factory=list, repr=False)

    def verdict(self) -> str:
        """The table's "responds?" cell: yes / no / no (never changed), said to be void when a control failed."""
        base = _verdict(self.responds, self.varied, self.seeds)
        if not self.valid:
            return f"void: a control failed ({base})"
        if self.flips:
            flipped = [w["wording"] for w in self.wordings if w["responds"] != self.responds]
            return f"{base}, flips under rewording {', '.join(map(str, flipped))}"
        return base

    def spread(self) -> Optional[tuple[float, float]]:
        """The smallest and largest effect across the wordings (None without --paraphrases or effects)."""
        effects = [w["effect"] for w in self.wordings if w["effect"] is not None]
        return (min(effects), max(effects)) if len(self.wordings) > 1 and effects else None

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in dataclasses.asdict(self).items() if k != "responses"}
        out["verdict"] = self.verdict()
        spread = self.spread()
        out["spread"] = list(spread) if spread else None
        return out


@dataclass
class ProbeReport:
    run_id: str
    scenario: str
    policy: str
    results: list[ProbeResult]
    duration_s: float
    paraphrases: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "scenario": self.scenario, "policy": self.policy, "duration_s": self.duration_s,
                "paraphrases": self.paraphrases, "probes": [r.to_json() for r in self.results]}


def _verdict(responds: bool, varied: bool, seeds: int) -> str:
    if seeds == 0:
        return "no usable answer (every seed had a fallback)"
    return "yes" if responds else ("no (never changed)" if not varied else "no")


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


def read(responses: list[list[Optional[float]]], fallbacks: int, rate: bool) -> Reading:
    """Means per level and the paired effect over the seeds whose every answer was the policy's (not a fallback).

    The effect's interval: Newcombe's paired interval (from Wilson's) for a 0/1 response, else a percentile
    bootstrap of the mean difference, symmetric in sign; each level's: Wilson's for a 0/1 response, else a
    bootstrap."""
    kept = [s for s in range(len(responses[0])) if all(level[s] is not None for level in responses)]
    rows = [[level[s] for s in kept] for level in responses]
    if rate:
        ci = paired_rate_difference(rows[0], rows[-1])
    else:
        ci = mean_interval([b - a for a, b in zip(rows[0], rows[-1])], rate=False)
    levels = [mean_interval(r, rate=rate) for r in rows]
    lo, hi = ci["lo"], ci["hi"]
    flat = {x for level in rows for x in level}
    return Reading(
        means=[sum(r) / len(r) if r else None for r in rows], level_lo=[c["lo"] for c in levels],
        level_hi=[c["hi"] for c in levels], seeds=len(kept), effect=ci["mean"], lo=lo, hi=hi, method=ci["method"],
        responds=lo is not None and (lo > 0 or hi < 0), varied=len(flat) > 1, fallbacks=fallbacks, responses=responses)


def plan_probes(spec: RunSpec, names: Sequence[str] = (), seeds: int = DEFAULT_SEEDS,
                paraphrases: int = 0) -> tuple[type, list[Probe], list[Any]]:
    """(scenario class, the probes, each probe's config) for `spec`; UsageError for bad input, before anything runs."""
    if not isinstance(seeds, int) or isinstance(seeds, bool) or not MIN_SEEDS <= seeds <= MAX_SEEDS:
        raise UsageError(f"--seeds must be a whole number from {MIN_SEEDS} to {MAX_SEEDS:,} (fewer seeds give no usable "
                         f"interval); got {seeds!r}")
    if not isinstance(paraphrases, int) or isinstance(paraphrases, bool) or not 0 <= paraphrases <= MAX_PARAPHRASES:
        raise UsageError(f"--paraphrases must be a whole number from 0 to {MAX_PARAPHRASES}; got {paraphrases!r}")
    cls = get_scenario(spec.scenario)
    if paraphrases and not spec.uses_llm:
        raise UsageError(f"--paraphrases rewords the prompts an LLM reads; policy {spec.policy!r} asks no LLM "
                         "(use --policy llm, or synthesis where the scenario has it)")
    probes = choose_probes(cls, names)
    configs = [validate_config(cls.Config, {**spec.config, **dict(p.config)}) for p in probes]
    for probe, config in zip(probes, configs):  # a world the probe cannot be set up in is bad input, found here
        for level in probe.levels:
            _situate(cls, probe, config, spec, spec.seed, level)
    return cls, probes, configs


def _model(cls: type, probe: Probe, config: Any, spec: RunSpec, seed: int, broker: DecisionBroker) -> Any:
    """A fresh model of `seed` at the start of its first tick (built by the probe's smaller world where it has one)."""
    world = probe.world(cls, config) if probe.world is not None else cls
    model = world(config, seed=seed, broker=broker, policy=spec.policy, contract=spec.contract)
    enter_first_tick(model)
    return model


def _situate(cls: type, probe: Probe, config: Any, spec: RunSpec, seed: int, level: Any,
             broker: Optional[DecisionBroker] = None, before: Optional[Decision] = None,
             facts: Optional[dict] = None) -> DecisionRequest:
    """`probe`'s request at `level` in a fresh model of `seed` (after the prelude's decision `before`, if any);
    UsageError when the probe cannot be set up there. `facts`, when given, receives the request's facts."""
    try:
        model = _model(cls, probe, config, spec, seed, broker or DecisionBroker({}))
        if before is not None and probe.prelude is not None:
            probe.prelude.take(model, before)
        request = probe.situate(model, level)
        if request is not None:  # (whole: a rewording edits its question, and the model is not read again)
            request = request.rendered()
        if request is not None and facts is not None:
            facts.update(probe.facts(model, request))
        model.release()  # (thousands of models: each is freed once its request is made)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - a world the probe does not fit (too few agents, businesses, ...)
        raise UsageError(f"probe {probe.name} cannot be set up at {probe.variable} = {level!r} with this config: "
                         f"{type(exc).__name__}: {exc}") from None
    if request is None:
        raise UsageError(f"probe {probe.name} made no request at {probe.variable} = {level!r} (with this config, seed {seed})")
    return request


@dataclass
class _Asked:
    """One matched request: its level and seed (indices), the request and the facts a rewording may name."""

    level: int
    seed: int
    request: DecisionRequest
    facts: dict[str, Any]


def _prelude(cls: type, probe: Probe, config: Any, spec: RunSpec, seeds: int, broker: DecisionBroker,
             wording: Wording, prompt: Optional[LLMBackend]
             ) -> tuple[dict[int, Decision], list[tuple[int, DecisionRequest, Decision]], bool]:
    """The probed policy's decision before the matched requests (e.g. the program it writes), per seed, in one batch:
    {seed index: decision}, (seed index, request, decision) for the store, and whether a question was reworded."""
    if probe.prelude is None:
        return {}, [], False
    asked: list[tuple[int, DecisionRequest]] = []
    reworded = False
    for s in range(seeds):
        model = _model(cls, probe, config, spec, spec.seed + s, broker)
        request = probe.prelude.ask(model)
        facts = dict(probe.facts(model, request)) if request is not None else {}
        model.release()
        if request is not None:
            request, changed = reword_question(request, probe.questions, facts, wording.k)
            asked.append((s, request))
            reworded = reworded or changed
    if not asked:
        return {}, [], False
    with _worded(prompt, wording):
        decided = broker.decide_all([r for _, r in asked])
    return ({s: decided[k] for k, (s, _) in enumerate(asked)}, [(s, r, decided[k]) for k, (s, r) in enumerate(asked)],
            reworded)


def _requests(cls: type, probe: Probe, config: Any, spec: RunSpec, seeds: int, broker: DecisionBroker,
              before: Mapping[int, Decision]) -> list[_Asked]:
    """Every level x seed request of `probe`, seed by seed; each seed's requests must share their agent, phase, decision
    seed and action space (else the probe is broken: RuntimeError)."""
    asked = []
    for s in range(seeds):
        mine = []
        for li, level in enumerate(probe.levels):
            facts: dict[str, Any] = {}
            request = _situate(cls, probe, config, spec, spec.seed + s, level, broker, before.get(s), facts)
            mine.append(_Asked(li, s, request, facts))
        spaces = {repr(a.request.space) for a in mine}
        if len(spaces) > 1:  # the probe's own defect, not the user's input
            raise RuntimeError(f"probe {probe.name} asks in different action spaces at its levels ({', '.join(sorted(spaces))}): "
                               "a bound that moves with the variable could make the response; give every level one space")
        if len({(a.request.agent_id, a.request.seed, a.request.phase) for a in mine}) > 1:
            raise RuntimeError(f"probe {probe.name} asks different agents, phases or decision seeds at its levels (seed "
                               f"{spec.seed + s}): its requests must differ in the probed variable alone")
        asked.extend(mine)
    return asked


class _worded:
    """Context: the LLM backend renders with `wording`'s system message (the original one outside it, and for wording 0)."""

    def __init__(self, llm: Optional[LLMBackend], wording: Wording) -> None:
        self.llm, self.wording = llm, wording
        self.saved: Any = None
        self.swapped = False

    def __enter__(self) -> None:
        if self.llm is not None and self.wording.system is not None:
            self.saved, self.swapped = self.llm.prompt, True
            self.llm.prompt = RewordedSystem(self.saved, self.wording.system)

    def __exit__(self, *exc: Any) -> None:
        if self.swapped:
            self.llm.prompt = self.saved


def _llm_prompt(backends: Mapping[str, Backend]) -> Optional[LLMBackend]:
    """The `llm` backend a rewording changes the system message of: the LLMBackend itself or inside the cache."""
    backend = backends.get("llm")
    inner = backend.backend if isinstance(backend, CachedBackend) else backend
    return inner if isinstance(inner, LLMBackend) else None


def _answer(probe: Probe, asked: list[_Asked], seeds: int, broker: DecisionBroker, wording: Wording,
            prompt: Optional[LLMBackend]) -> tuple[Reading, list[tuple[_Asked, DecisionRequest, Decision]], bool]:
    """The probed policy's decisions on `asked` under `wording` (one batch): its reading, the decisions, and
    whether any question was reworded."""
    reworded = [reword_question(a.request, probe.questions, a.facts, wording.k) for a in asked]
    requests = [r for r, _ in reworded]
    with _worded(prompt, wording):
        decided = broker.decide_all(requests)  # (one agent of many models: its id repeats)
    return (_reading(probe, asked, decided, seeds), list(zip(asked, requests, decided)),
            any(changed for _, changed in reworded))


def _reading(probe: Probe, asked: list[_Asked], decided: list[Decision], seeds: int) -> Reading:
    """The reading of `decided` (one decision per request of `asked`): a fallback's seed is left out, and counted."""
    responses: list[list[Optional[float]]] = [[None] * seeds for _ in probe.levels]
    for a, d in zip(asked, decided):
        responses[a.level][a.seed] = None if d.fallback else probe.measure(d.value, a.request)
    return read(responses, sum(d.fallback for d in decided), probe.rate)


def _control(probe: Probe, control: Control, asked: list[_Asked], seeds: int) -> Reading:
    """A control's reading: its scripted policy answers the very requests the probed policy answered."""
    broker = DecisionBroker({"scripted": ScriptedBackend({CONTROL: control.decide})})
    decided = broker.decide_all([dataclasses.replace(a.request, backend="scripted", strategy=CONTROL) for a in asked])
    return _reading(probe, asked, decided, seeds)


def probe_once(cls: type, probe: Probe, config: Any, spec: RunSpec, seeds: int, broker: DecisionBroker,
               paraphrases: int = 0, prompt: Optional[LLMBackend] = None) -> tuple[ProbeResult, list[AgentStepRecord]]:
    """`probe` answered by the policy of `spec` (through `broker`) under its original wording and `paraphrases`
    rewordings, and by its two controls; the result and the probed policy's decisions as agent steps."""
    steps: list[AgentStepRecord] = []
    readings: list[tuple[Wording, Reading, dict[str, bool]]] = []
    original: list[_Asked] = []
    asked: list[_Asked] = []
    for wording in wordings(paraphrases):
        before, written, prelude_reworded = _prelude(cls, probe, config, spec, seeds, broker, wording, prompt)
        if wording.k == 0 or probe.prelude is not None:  # (a prelude's answer differs per wording: ask again)
            asked = _requests(cls, probe, config, spec, seeds, broker, before)
        if wording.k == 0:
            original = asked
        reading, decided, reworded = _answer(probe, asked, seeds, broker, wording, prompt)
        llm_asked = [r for _, r, _ in written] + [r for _, r, d in decided if d.backend == "llm"]
        system = (wording.system is not None and prompt is not None and bool(llm_asked)
                  and RewordedSystem(prompt.prompt, wording.system).rewords(llm_asked[0]))
        readings.append((wording, reading, {"question": reworded or prelude_reworded, "system": system}))
        for s, request, d in written:
            steps.append(AgentStepRecord(len(steps), {request.phase: d.value, "seed": spec.seed + s, "wording": wording.k},
                                         0.0, 0.0, d.fallback, d.backend, d.reason, None))
        for a, request, d in decided:
            value = None if d.fallback else probe.measure(d.value, a.request)
            action = {a.request.phase: d.value, "level": probe.levels[a.level], "seed": spec.seed + a.seed,
                      "agent": a.request.agent_id, "wording": wording.k}
            steps.append(AgentStepRecord(len(steps), action, value if value is not None else 0.0,
                                         value if value is not None else 0.0, d.fallback, d.backend, d.reason, None))
    main = readings[0][1]
    controls = {}
    for role, control, must in (("blind", probe.blind, False), ("follows", probe.follows, True)):
        r = _control(probe, control, original, seeds)
        controls[role] = {"does": control.does, **r.figures(), "ok": r.responds == must}
    result = ProbeResult(
        name=probe.name, variable=probe.variable, response=probe.response, finding=probe.finding, unforced=probe.unforced,
        levels=list(probe.levels), means=main.means, level_lo=main.level_lo, level_hi=main.level_hi, seeds=main.seeds,
        effect=main.effect, lo=main.lo, hi=main.hi, method=main.method, responds=main.responds, varied=main.varied,
        fallbacks=main.fallbacks, controls=controls, valid=all(c["ok"] for c in controls.values()),
        wordings=[{"wording": w.k, "reworded": changed, **r.figures()} for w, r, changed in readings]
        if paraphrases else [],
        flips=any(r.responds != main.responds for _, r, _ in readings), responses=main.responses)
    return result, steps


def run_probes(spec: RunSpec, store: Store, *, names: Sequence[str] = (), seeds: int = DEFAULT_SEEDS,
               paraphrases: int = 0, backends: Optional[Mapping[str, Backend]] = None,
               progress: Optional[Callable[[int, int, Any], None]] = None) -> ProbeReport:
    """Run the probes `names` (default: all) of `spec`'s scenario, `seeds` seeds per level from `spec.seed` on,
    decided by `spec`'s policy through `backends` (default: those a run of `spec` uses, behind the store's
    cache), each under its original wording and `paraphrases` rewordings; store them as one run of origin
    `probe` and return the report."""
    cls, probes, configs = plan_probes(spec, names, seeds, paraphrases)
    backends = dict(backends) if backends is not None else make_backends(spec, cls, store, per_agent=True)
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
            prompt = _llm_prompt(backends)  # (after bind: bind picks the built-in prompt of the run's profile)
            for tick, (probe, config) in enumerate(zip(probes, configs), start=1):
                t0 = time.perf_counter()
                result, steps = probe_once(cls, probe, config, spec, seeds, broker, paraphrases, prompt)
                results.append(result)
                metrics = {"effect": result.effect, "effect_lo": result.lo, "effect_hi": result.hi,
                           "responds": float(result.responds), "valid": float(result.valid),
                           "fallbacks": float(result.fallbacks),
                           **{f"mean_at_level_{i + 1}": m for i, m in enumerate(result.means)}}
                if paraphrases:
                    metrics["flips"] = float(result.flips)
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
                      f"{r.name}.responds": float(r.responds), f"{r.name}.valid": float(r.valid)})
        if paraphrases:
            final[f"{r.name}.flips"] = float(r.flips)
    duration = time.perf_counter() - started
    with shielded(then_raise=False):
        store.finish_run(run_id, "finished", None, duration, final)
    return ProbeReport(run_id, spec.scenario, spec.policy, results, duration, paraphrases)


def refuse_probe_run(run: Any, verb: str) -> None:
    """A probe, interview or survey run holds answers, not a world's ticks: UsageError for replay, resume and fork
    (`societas replay` re-asks an interview or survey from the cache: runner.studies.replay_study)."""
    if getattr(run, "origin", None) == ORIGIN:
        raise UsageError(f"run {run.id} is a validity probe (societas probe): it has no world to {verb}; "
                         f"run the probe again (its LLM answers come from the cache)")
    if getattr(run, "origin", None) in ("interview", "survey"):
        raise UsageError(f"run {run.id} is an {run.origin} of run {run.parent_id} at tick {run.branch_tick}: it has no "
                         f"world to {verb}; ask again (its answers come from the cache), or `societas replay {run.id}`")
