"""The conformance kit: check that a scenario keeps the platform's contract, as PettingZoo's
`parallel_api_test` checks an environment.

    societas check path/to/my_scenario.py:MyScenario      # every rule, passed or failed, and exit 1 on a failure

    from sim.testing import check_scenario                # (or societas.testing)
    check_scenario("path/to/my_scenario.py:MyScenario")   # or the class, or a registered name

`run_checks` runs the scenario for a few ticks with its scripted agents and with `FakeLLM` (an LLM
that needs no model: seeded in-space answers, and an unusable one for every fourth request) and
reports every rule it breaks, each with what broke it; `check_scenario` raises `ConformanceError`
naming them all. The rules:

1. **declared**: a `Config` that extends ScenarioConfig, a `horizon_field` that is an int field of
   it, and a `default_strategy` among its `strategies` (the others are not checked while it fails);
2. **stored**: every tick is committed, and every per-tick and final metric the run stores is
   documented (`tick_metric_docs`, `final_metric_docs`) and a finite number or null;
3. **reproducible**: the same spec and seed store identical ticks, agent steps and events;
4. **seeded**: with a `random` strategy (chosen by a `strategy` field), different seeds give different runs;
5. **resumable**: a run stopped half-way and resumed stores what the uninterrupted run stores (the
   world is rebuilt from the seed alone: no global randomness, no state outside the model);
6. **batched and checked**: with LLM agents, each phase's requests reach the LLM in one batch, every
   decision is stored inside its space, and an unusable answer becomes the request's default,
   recorded as a fallback with its reason;
7. **replayable**: the LLM run replays from its cache alone, tick for tick.

A rule whose run fails (an exception in the scenario's code) fails with that exception; a rule that
needs a run that could not be made is reported as not checked. The project's own scenarios pass it
(tests/test_conformance.py), and so does `scenarios.examples.coins:Coins`, a whole scenario in one file;
`scenarios.examples.broken:BrokenCoins` breaks four rules, as a scenario written in a hurry does.

`check_probes` checks a scenario's validity probes (sim.tick.probe), as instruments: for every probe and
several seeds, the requests of one seed share their agent, decision seed and action space (a bound that
moved with the variable could make the response), the negative control (a policy blind to the variable)
reads "does not respond" and the positive control reads "responds". tests/test_probes.py runs it on every
scenario that has probes; `societas check --probes` adds it to the report.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from agents.llm.backend import LLMBackend
from agents.llm.base import Answer, Messages
from agents.llm.cache import CachedBackend
from agents.scripted import ScriptedBackend
from runner.config import build_spec
from runner.execution import RunFailed, RunInterrupted, RunResult, execute, horizon
from runner.probing import run_probes
from runner.replay import replay_run
from runner.resume import resume_run
from scenarios.registry import get_scenario
from sim.contracts.backend import Backend, ReplayMode
from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from sim.core.fields import describe_fields
from sim.core.spaces import Choice, Form, Number, Text
from sim.core.spec import RunSpec
from sim.store.store import Store
from sim.tick.config import ScenarioConfig
from sim.tick.model import SocietyModel

GARBAGE = "not a valid answer"


class ConformanceError(AssertionError):
    """A scenario broke a rule of the platform's contract (the message names the rule)."""


class FakeLLM:
    """An `LLM` that needs no model: a seeded in-space answer for each request, and an unusable one (text that is
    in no space but a Text's) for every `garbage_every`-th request of a batch. Records each batch's size."""

    model_id = "fake-llm"

    def __init__(self, garbage_every: int = 4, text: str = "hello") -> None:
        self.garbage_every = garbage_every
        self.text = text  # what it writes where a Text is asked for
        self.sampling = {"garbage_every": garbage_every, "text": text}
        self.batches: list[int] = []

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        self.batches.append(len(requests))
        out = []
        for i, r in enumerate(requests):
            rng = random.Random(r.seed)
            bad = self.garbage_every and i % self.garbage_every == 0 and not isinstance(r.space, Text)
            out.append(Answer(GARBAGE if bad else _sample(r.space, rng, self.text), raw="fake"))
        return out


def _sample(space: Any, rng: random.Random, text: str) -> Any:
    """A value inside `space`, drawn from `rng` (`text` for a Text)."""
    if isinstance(space, Choice):
        return rng.choice(space.options)
    if isinstance(space, Number):
        return space.snap(rng.uniform(space.lo, space.hi))
    if isinstance(space, Form):
        return {k: _sample(sub, rng, text) for k, sub in space.fields}
    return text


def fake_llm_backends(cls: type[SocietyModel], store: Store, llm: Optional[FakeLLM] = None,
                      replay: Optional[ReplayMode] = None) -> dict[str, Backend]:
    """The backends of a run whose LLM agents are played by `llm` (a FakeLLM), behind the store's cache
    (`replay`: answered by the cache alone, as a replay's)."""
    llm = llm or FakeLLM()
    return {"scripted": ScriptedBackend(cls.strategies),
            "llm": CachedBackend(LLMBackend(llm.model_id, llm.sampling, llm=llm), store, replay)}


#: the rules, in the order they are checked
RULES = ("declared", "stored", "reproducible", "seeded", "resumable", "batched and checked", "replayable")


@dataclass
class ConformanceReport:
    """What the kit ran and found: the rules that passed, those that failed (each with every reason found),
    those skipped (they do not apply) and those not checked (a run they need could not be made)."""

    scenario: str
    passed: list[str] = field(default_factory=list)
    failed: dict[str, list[str]] = field(default_factory=dict)  # rule -> what broke it
    skipped: dict[str, str] = field(default_factory=dict)  # rule -> why it does not apply
    not_checked: dict[str, str] = field(default_factory=dict)  # rule -> the failure that kept it from running
    runs: dict[str, str] = field(default_factory=dict)  # label -> run id

    @property
    def ok(self) -> bool:
        """Whether every rule that was checked passed and none was left unchecked."""
        return not self.failed and not self.not_checked

    def failures(self) -> list[str]:
        """One line a failure, `scenario: rule: why`, in the rules' order (then the rules not checked)."""
        lines = [f"{self.scenario}: {rule}: {why}" for rule in self.failed for why in self.failed[rule]]
        return lines + [f"{self.scenario}: {rule}: not checked ({why})" for rule, why in self.not_checked.items()]

    def to_json(self) -> dict[str, Any]:
        return {"scenario": self.scenario, "ok": self.ok, "passed": self.passed, "failed": self.failed,
                "skipped": self.skipped, "not_checked": self.not_checked}


class _Rules:
    """Records the failures of the rule being checked, then whether it passed."""

    def __init__(self, report: ConformanceReport) -> None:
        self.report = report

    def __call__(self, label: str, ok: bool, why: str) -> None:
        if not ok and why not in self.report.failed.get(label, ()):
            self.report.failed.setdefault(label, []).append(why)

    def done(self, label: str) -> bool:
        """Close `label`: passed unless a failure was recorded; returns whether it passed."""
        if label not in self.report.failed:
            self.report.passed.append(label)
            return True
        return False

    @contextmanager
    def attempt(self, label: str, doing: str = "its run") -> Iterator[None]:
        """Check `label` inside: an exception (the scenario's own code failed, or what its runs broke) fails it,
        naming what `doing` raised; a run the user interrupted stops the whole check."""
        try:
            yield
        except RunInterrupted:
            raise
        except Exception as exc:  # noqa: BLE001 - the scenario's failure is the finding
            said = exc.reason if isinstance(exc, RunFailed) else f"{type(exc).__name__}: {exc}"  # (a run's stored reason)
            self(label, False, f"{doing} failed: {said.splitlines()[0] if said else ''}")

    def not_checked(self, labels: Sequence[str], why: str) -> None:
        for label in labels:
            self.report.not_checked[label] = why


def check_scenario(scenario: Union[str, type[SocietyModel]], *, ticks: int = 3, seed: int = 7,
                   sets: Sequence[str] = (), store: Optional[Store] = None) -> ConformanceReport:
    """Run the conformance checks on `scenario` (a class, a registered name or a `file.py:Class` reference).

    As `run_checks`; raises ConformanceError naming every rule that failed (one line each), else returns the report.
    """
    report = run_checks(scenario, ticks=ticks, seed=seed, sets=sets, store=store)
    if not report.ok:
        raise ConformanceError("\n".join(report.failures()))
    return report


def run_checks(scenario: Union[str, type[SocietyModel]], *, ticks: int = 3, seed: int = 7, sets: Sequence[str] = (),
               store: Optional[Store] = None, probes: bool = False) -> ConformanceReport:
    """Check every rule on `scenario` (a class, a registered name or a `file.py:Class` reference) and report them all.

    `ticks` bounds each run, `sets` adds config fields (`key=value`, as `--set`); runs go to `store`, else to a
    temporary SQLite file. `probes` adds the rule "probes" (`check_probes`, scripted). A scenario that cannot be
    found, or fields that its config refuses, raise UsageError.
    """
    cls = get_scenario(scenario)
    if store is None:
        with tempfile.TemporaryDirectory(prefix="societas-conformance-") as tmp:
            own = Store(f"sqlite:///{Path(tmp) / 'runs.db'}")
            try:
                return run_checks(cls, ticks=ticks, seed=seed, sets=sets, store=own, probes=probes)
            finally:
                own.close()
    report = _check(cls, store, ticks, seed, list(sets))
    if probes and "declared" in report.passed:
        _check_probes(cls, store, list(sets), report)
    return report


def _check_probes(cls: type[SocietyModel], store: Store, sets: list[str], report: ConformanceReport) -> None:
    if not getattr(cls, "probes", ()):
        report.skipped["probes"] = "the scenario declares no validity probe"
        return
    rule = _Rules(report)
    with rule.attempt("probes", "running its probes"):
        results = run_probes(build_spec(cls, sets=sets, policy="scripted"), store, seeds=10).results
        for line in probe_failures(cls, results):
            rule("probes", False, line.split(": ", 1)[1])
    rule.done("probes")


def _check(cls: type[SocietyModel], store: Store, ticks: int, seed: int, sets: list[str]) -> ConformanceReport:
    report = ConformanceReport(cls.name or cls.__qualname__)
    rule = _Rules(report)

    # 1. declared
    config_ok = isinstance(cls.Config, type) and issubclass(cls.Config, ScenarioConfig)
    rule("declared", config_ok, "`Config` must be a subclass of sim.tick.config.ScenarioConfig")
    horizon_kind = next((f.kind for f in describe_fields(cls.Config) if f.name == cls.horizon_field), None) if config_ok else int
    rule("declared", horizon_kind is int, f"`horizon_field` ({cls.horizon_field!r}) must name an int field of its Config")
    rule("declared", not cls.strategies or cls.default_strategy in cls.strategies,
         f"`default_strategy` ({cls.default_strategy!r}) must be one of its strategies {sorted(cls.strategies)}")

    def spec(**kw: Any) -> RunSpec:
        return build_spec(cls, ticks=ticks, sets=sets + kw.pop("more", []), **kw)

    scripted: Optional[RunSpec] = None
    if "declared" not in report.failed:
        try:
            scripted = spec(seed=seed)
        except UsageError as exc:
            if sets:  # the config refuses what the caller set: bad input, found before any run
                raise
            rule("declared", False, f"a spec of its own defaults is refused: {exc}")
        except Exception as exc:  # noqa: BLE001 - the scenario's own code failed: that is the finding
            rule("declared", False, f"building a spec of its defaults failed: {type(exc).__name__}: {exc}")
    if not rule.done("declared") or scripted is None:
        rule.not_checked(RULES[1:], "its declaration is broken: see `declared`")
        return report

    # 2. stored, 3. reproducible
    a = b = None
    with rule.attempt("stored"):
        a, b = execute(scripted, store), execute(scripted, store)
        report.runs.update(scripted=a.run_id, scripted_again=b.run_id)
        _stored(cls, store, a, rule)
    rule.done("stored")
    if a is None or b is None:
        rule.not_checked(("reproducible", "resumable"), "the scripted run failed: see `stored`")
    else:
        rule("reproducible", store.tick_snapshots(a.run_id) == store.tick_snapshots(b.run_id) and a.metrics == b.metrics,
             "the same spec and seed stored different ticks (randomness that does not come from the model's RNG or "
             "the request seeds?)")
        rule.done("reproducible")

    # 4. seeded
    if "random" in cls.strategies and "strategy" in cls.Config.model_fields:
        with rule.attempt("seeded"):
            runs = [execute(spec(seed=s, more=["strategy=random"]), store) for s in (1, 2, 3)]
            snaps = [store.tick_snapshots(r.run_id) for r in runs]
            rule("seeded", any(x != snaps[0] for x in snaps[1:]), "three seeds of the `random` strategy gave one run")
        rule.done("seeded")
    else:
        report.skipped["seeded"] = "no `random` strategy (and `strategy` field to choose it)"

    # 5. resumable
    if a is not None and a.ticks >= 2:
        half = a.ticks // 2
        with rule.attempt("resumable", f"resuming a run stopped after tick {half}"):
            stopped = execute(scripted, store, stop_after=half)
            resumed = resume_run(store, stopped.run_id)
            report.runs["resumed"] = resumed.run_id
            rule("resumable", store.tick_snapshots(resumed.run_id) == store.tick_snapshots(a.run_id),
                 f"stopped after tick {half} and resumed, the run differs from the uninterrupted one")
        rule.done("resumable")
    elif a is not None:
        report.skipped["resumable"] = "the run ended after one tick"

    # 6. batched and checked
    llm_run = None
    with rule.attempt("batched and checked"):
        fake = FakeLLM()
        llm_run = execute(spec(seed=seed, policy="llm"), store, backends=fake_llm_backends(cls, store, fake))
        report.runs["llm"] = llm_run.run_id
        steps = store.steps(llm_run.run_id)
        per_tick = max((sum(1 for s in steps if s.tick == t) for t in range(1, llm_run.ticks + 1)), default=0)
        rule("batched and checked", bool(fake.batches), "no LLM agent was asked anything under --policy llm")
        rule("batched and checked", not fake.batches or max(fake.batches) <= per_tick,
             f"a batch held {max(fake.batches, default=0)} requests, more than the {per_tick} agents of a tick: one "
             "batch per phase")
        _in_spaces(store, llm_run, rule)
    rule.done("batched and checked")

    # 7. replayable
    if llm_run is None:
        rule.not_checked(("replayable",), "the LLM run failed: see `batched and checked`")
        return report
    with rule.attempt("replayable"):
        replayed = replay_run(store, llm_run.run_id, backends=fake_llm_backends(cls, store, FakeLLM(), ReplayMode()))
        rule("replayable", replayed["matched"], "the replay from the cache differs: "
             + "; ".join(f"tick {m['tick']}: {m['what']}" for m in replayed["mismatches"][:3]))
    rule.done("replayable")
    return report


def _stored(cls: type[SocietyModel], store: Store, result: RunResult, rule: Any) -> None:
    ticks = store.ticks(result.run_id)
    rule("stored", len(ticks) == result.ticks and [t.tick for t in ticks] == list(range(1, result.ticks + 1)),
         f"{len(ticks)} ticks stored for a run of {result.ticks}")
    stored_spec = RunSpec.model_validate(store.get_run(result.run_id).spec)
    rule("stored", result.ticks <= horizon(stored_spec, cls), "the run went past its horizon")
    docs = cls.metric_docs()
    undocumented = sorted({k for t in ticks for k in t.metrics} - set(docs["tick"]))
    rule("stored", not undocumented, f"per-tick metrics {undocumented} are not in tick_metric_docs")
    bad = {k: t.tick for t in reversed(ticks) for k in _not_numbers(t.metrics)}
    rule("stored", not bad, f"per-tick metrics {sorted(bad)} are not numbers (or null) (first at tick {min(bad.values(), default=0)})")
    undocumented = sorted(set(result.metrics) - set(docs["final"]))
    rule("stored", not undocumented, f"final metrics {undocumented} are not in final_metric_docs")
    rule("stored", not _not_numbers(result.metrics), f"final metrics {_not_numbers(result.metrics)} are not numbers (or null)")


def _not_numbers(metrics: dict[str, Any]) -> list[str]:
    return sorted(k for k, v in metrics.items() if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))))


def _in_spaces(store: Store, result: RunResult, rule: Any) -> None:
    fell = [s for s in store.steps(result.run_id) if s.fallback]
    rule("batched and checked", bool(fell), f"no decision fell back, though every 4th LLM answer was {GARBAGE!r}")
    rule("batched and checked", all(s.reason for s in fell), "a fallback was stored without its reason")
    empty = [c.agent_id for c in store.llm_calls(result.run_id) if c.prompt.strip() == ""]
    rule("batched and checked", not empty, f"{len(empty)} empty prompts were sent (the first to agent {empty[:1]})")
    reached = [(s.agent_id, phase) for s in store.steps(result.run_id) for phase, value in (s.action or {}).items()
               if value == GARBAGE]
    rule("batched and checked", not reached, f"{len(reached)} decisions {GARBAGE!r} were stored (the first: agent, "
                                             f"phase {reached[:1]}): an answer outside its space reached the world")


def probe_failures(cls: type[SocietyModel], results: Sequence[Any]) -> list[str]:
    """What is wrong with each probe's controls (`check_probes`): one line a control that read the wrong way."""
    out = []
    for r in results:
        for role, must in (("blind", False), ("follows", True)):
            c = r.controls[role]
            if c["responds"] != must:
                out.append(
                    f"{cls.name}: probe {r.name}: its {role} control ({c['does']}) read "
                    f"{'responds' if c['responds'] else 'does not respond'} (effect {c['effect']} [{c['lo']}, {c['hi']}], "
                    f"means {c['means']}): "
                    f"{'the bounds force a response' if must is False else 'the probe cannot see a response'}")
    return out


def check_probes(scenario: Union[str, type[SocietyModel]], *, seeds: int = 10, sets: Sequence[str] = (),
                 policy: str = "scripted", store: Optional[Store] = None) -> list[Any]:
    """Run every validity probe of `scenario` under `policy` and check it as an instrument (see the module's
    docstring); returns the probes' results, raises ConformanceError naming every control that read the wrong way."""
    cls = get_scenario(scenario)
    if store is None:
        with tempfile.TemporaryDirectory(prefix="societas-probes-") as tmp:
            own = Store(f"sqlite:///{Path(tmp) / 'runs.db'}")
            try:
                return check_probes(cls, seeds=seeds, sets=sets, policy=policy, store=own)
            finally:
                own.close()
    backends = fake_llm_backends(cls, store) if policy == "llm" else None
    report = run_probes(build_spec(cls, sets=list(sets), policy=policy), store, seeds=seeds, backends=backends)
    failures = probe_failures(cls, report.results)
    if failures:
        raise ConformanceError("\n".join(failures))
    return report.results


__all__ = ["check_scenario", "run_checks", "check_probes", "probe_failures", "RULES", "ConformanceError", "ConformanceReport",
           "FakeLLM", "fake_llm_backends"]
