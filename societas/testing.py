"""The conformance kit: check that a scenario keeps the platform's contract, as PettingZoo's
`parallel_api_test` checks an environment.

    from societas.testing import check_scenario

    check_scenario("path/to/my_scenario.py:MyScenario")   # or the class, or a registered name

`check_scenario` runs the scenario for a few ticks with its scripted agents and with `FakeLLM` (an
LLM that needs no model: seeded in-space answers, and an unusable one for every fourth request)
and raises `ConformanceError`, naming the rule and what broke it, at the first failure:

1. **declared**: a `Config` that extends ScenarioConfig, a `horizon_field` that is an int field of
   it, and a `default_strategy` among its `strategies`;
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

The project's own scenarios pass it (tests/test_conformance.py).

`check_probes` checks a scenario's validity probes (sim.tick.probe), as instruments: for every probe and
several seeds, the requests of one seed share their agent, decision seed and action space (a bound that
moved with the variable could make the response), the negative control (a policy blind to the variable)
reads "does not respond" and the positive control reads "responds". tests/test_probes.py runs it on every
scenario that has probes.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from agents.llm.backend import LLMBackend
from agents.llm.base import Answer, Messages
from agents.llm.cache import CachedBackend
from agents.scripted import ScriptedBackend
from scenarios.registry import get_scenario
from sim.contracts.backend import Backend, ReplayMode
from sim.core.contracts import DecisionRequest
from sim.core.fields import describe_fields
from sim.core.spaces import Choice, Form, Number, Text
from sim.core.spec import RunSpec
from runner.config import build_spec
from runner.probing import run_probes
from runner.replay import replay_run
from runner.resume import resume_run
from runner.execution import RunResult, execute, horizon
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


@dataclass
class ConformanceReport:
    """What `check_scenario` ran and found (it raises at the first failure, so every rule here passed)."""

    scenario: str
    passed: list[str] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)  # label -> run id
    skipped: dict[str, str] = field(default_factory=dict)  # rule -> why


def check_scenario(scenario: Union[str, type[SocietyModel]], *, ticks: int = 3, seed: int = 7,
                   sets: Sequence[str] = (), store: Optional[Store] = None) -> ConformanceReport:
    """Run the conformance checks on `scenario` (a class, a registered name or a `file.py:Class` reference).

    `ticks` bounds each run, `sets` adds config fields (`key=value`, as `--set`); runs go to `store`,
    else to a temporary SQLite file. Returns a report; raises ConformanceError at the first failure.
    """
    cls = get_scenario(scenario)
    if store is not None:
        return _check(cls, store, ticks, seed, list(sets))
    with tempfile.TemporaryDirectory(prefix="societas-conformance-") as tmp:
        own = Store(f"sqlite:///{Path(tmp) / 'runs.db'}")
        try:
            return _check(cls, own, ticks, seed, list(sets))
        finally:
            own.close()


def _check(cls: type[SocietyModel], store: Store, ticks: int, seed: int, sets: list[str]) -> ConformanceReport:
    name = cls.name or cls.__qualname__
    report = ConformanceReport(name)

    def rule(label: str, ok: bool, why: str) -> None:
        if not ok:
            raise ConformanceError(f"{name}: {label}: {why}")

    # 1. declared
    rule("declared", isinstance(cls.Config, type) and issubclass(cls.Config, ScenarioConfig),
         "`Config` must be a subclass of sim.tick.config.ScenarioConfig")
    horizon_kind = next((f.kind for f in describe_fields(cls.Config) if f.name == cls.horizon_field), None)
    rule("declared", horizon_kind is int, f"`horizon_field` ({cls.horizon_field!r}) must name an int field of its Config")
    rule("declared", not cls.strategies or cls.default_strategy in cls.strategies,
         f"`default_strategy` ({cls.default_strategy!r}) must be one of its strategies {sorted(cls.strategies)}")
    report.passed.append("declared")

    def spec(**kw: Any) -> RunSpec:
        return build_spec(cls, ticks=ticks, sets=sets + kw.pop("more", []), **kw)

    # 2. stored, 3. reproducible
    scripted = spec(seed=seed)
    a, b = execute(scripted, store), execute(scripted, store)
    report.runs.update(scripted=a.run_id, scripted_again=b.run_id)
    _stored(cls, store, a, rule)
    report.passed.append("stored")
    rule("reproducible", store.tick_snapshots(a.run_id) == store.tick_snapshots(b.run_id) and a.metrics == b.metrics,
         "the same spec and seed stored different ticks (randomness that does not come from the model's RNG or the "
         "request seeds?)")
    report.passed.append("reproducible")

    # 4. seeded
    if "random" in cls.strategies and "strategy" in cls.Config.model_fields:
        runs = [execute(spec(seed=s, more=["strategy=random"]), store) for s in (1, 2, 3)]
        snaps = [store.tick_snapshots(r.run_id) for r in runs]
        rule("seeded", any(s != snaps[0] for s in snaps[1:]), "three seeds of the `random` strategy gave one run")
        report.passed.append("seeded")
    else:
        report.skipped["seeded"] = "no `random` strategy (and `strategy` field to choose it)"

    # 5. resumable
    if a.ticks >= 2:
        half = a.ticks // 2
        stopped = execute(scripted, store, stop_after=half)
        resumed = resume_run(store, stopped.run_id)
        report.runs["resumed"] = resumed.run_id
        rule("resumable", store.tick_snapshots(resumed.run_id) == store.tick_snapshots(a.run_id),
             f"stopped after tick {half} and resumed, the run differs from the uninterrupted one")
        report.passed.append("resumable")
    else:
        report.skipped["resumable"] = "the run ended after one tick"

    # 6. batched and checked
    fake = FakeLLM()
    llm_run = execute(spec(seed=seed, policy="llm"), store, backends=fake_llm_backends(cls, store, fake))
    report.runs["llm"] = llm_run.run_id
    steps = store.steps(llm_run.run_id)
    per_tick = max((sum(1 for s in steps if s.tick == t) for t in range(1, llm_run.ticks + 1)), default=0)
    rule("batched and checked", bool(fake.batches), "no LLM agent was asked anything under --policy llm")
    rule("batched and checked", max(fake.batches) <= per_tick,
         f"a batch held {max(fake.batches)} requests, more than the {per_tick} agents of a tick: one batch per phase")
    _in_spaces(store, llm_run, rule)
    report.passed.append("batched and checked")

    # 7. replayable
    replayed = replay_run(store, llm_run.run_id, backends=fake_llm_backends(cls, store, FakeLLM(), ReplayMode()))
    rule("replayable", replayed["matched"], f"replay from the cache differs: {replayed['mismatches'][:3]}")
    report.passed.append("replayable")
    return report


def _stored(cls: type[SocietyModel], store: Store, result: RunResult, rule: Any) -> None:
    ticks = store.ticks(result.run_id)
    rule("stored", len(ticks) == result.ticks and [t.tick for t in ticks] == list(range(1, result.ticks + 1)),
         f"{len(ticks)} ticks stored for a run of {result.ticks}")
    stored_spec = RunSpec.model_validate(store.get_run(result.run_id).spec)
    rule("stored", result.ticks <= horizon(stored_spec, cls), "the run went past its horizon")
    docs = cls.metric_docs()
    for t in ticks:
        undocumented = sorted(set(t.metrics) - set(docs["tick"]))
        rule("stored", not undocumented, f"per-tick metrics {undocumented} are not in tick_metric_docs")
        _numbers(f"tick {t.tick}", t.metrics, rule)
    undocumented = sorted(set(result.metrics) - set(docs["final"]))
    rule("stored", not undocumented, f"final metrics {undocumented} are not in final_metric_docs")
    _numbers("final", result.metrics, rule)


def _numbers(where: str, metrics: dict[str, Any], rule: Any) -> None:
    bad = sorted(k for k, v in metrics.items() if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))))
    rule("stored", not bad, f"{where} metrics {bad} are not numbers (or null)")


def _in_spaces(store: Store, result: RunResult, rule: Any) -> None:
    fell = [s for s in store.steps(result.run_id) if s.fallback]
    rule("batched and checked", bool(fell), f"no decision fell back, though every 4th LLM answer was {GARBAGE!r}")
    rule("batched and checked", all(s.reason for s in fell), "a fallback was stored without its reason")
    for call in store.llm_calls(result.run_id):
        rule("batched and checked", call.prompt.strip() != "", f"an empty prompt was sent (agent {call.agent_id})")
    for s in store.steps(result.run_id):
        for phase, value in (s.action or {}).items():
            rule("batched and checked", value != GARBAGE, f"agent {s.agent_id}'s {phase} decision {GARBAGE!r} was "
                                                         "stored: an answer outside its space reached the world")


def check_probes(scenario: Union[str, type[SocietyModel]], *, seeds: int = 10, sets: Sequence[str] = (),
                 policy: str = "scripted", store: Optional[Store] = None) -> list[Any]:
    """Run every validity probe of `scenario` under `policy` and check it as an instrument (see the module's
    docstring); returns the probes' results, raises ConformanceError naming the probe and what failed."""
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
    for r in report.results:
        for role, must in (("blind", False), ("follows", True)):
            c = r.controls[role]
            if c["responds"] != must:
                raise ConformanceError(
                    f"{cls.name}: probe {r.name}: its {role} control ({c['does']}) read "
                    f"{'responds' if c['responds'] else 'does not respond'} (effect {c['effect']} [{c['lo']}, {c['hi']}], "
                    f"means {c['means']}): "
                    f"{'the bounds force a response' if must is False else 'the probe cannot see a response'}")
    return report.results


__all__ = ["check_scenario", "check_probes", "ConformanceError", "ConformanceReport", "FakeLLM", "fake_llm_backends"]
