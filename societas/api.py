"""The Python API: run scenarios and read stored runs from scripts and notebooks.

The same code paths as the CLI (`build_spec` validates, `execute` runs and stores), so a
run started here is a run like any other: listed by `societas list`, replayable, shown in
the app. Everything returned is plain data or a pandas DataFrame.

    from sim import run
    result = run("commons", fishers=10, months=12, seed=3)
    result.metrics["survival_time"]; result.per_tick.plot(y="stock")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Optional, Union

import pandas as pd
from pydantic import BaseModel

from agents.llm.prompts import PromptTemplate, register_template
from analysis.frames import run_frames
from analysis.sweeps import sweep_frame
from runner.backends import preflight
from runner.config import build_spec, validate_config
from runner.execution import RunFailed, execute
from runner.probing import DEFAULT_SEEDS, ProbeReport, run_probes
from runner.studies import DEFAULT_TOKENS, StudyReport, SweepSurvey
from runner.studies import interview as _interview
from runner.studies import survey as _survey
from runner.studies import survey_sweep as _survey_sweep
from scenarios.registry import get_scenario, register, register_strategy
from sim.core.errors import UsageError
from sim.core.spec import RunSpec
from sim.store.schema import DEFAULT_URL as DEFAULT_DB
from sim.store.schema import default_url as default_db
from sim.store.store import Store

__all__ = ["DEFAULT_DB", "Result", "configure", "spec", "run", "probe", "load_run", "runs", "load_sweep", "default_db",
           "interview", "survey", "survey_sweep", "UsageError", "RunFailed",
           # what a script or notebook names its own scenarios, strategies and prompts with (`@sim.register`...)
           "register", "register_strategy", "register_template", "PromptTemplate"]


def _open(db: Union[str, Store, None], *, create: bool) -> Store:
    return db if isinstance(db, Store) else Store(default_db(db), create=create)


def configure(scenario: Union[str, type], **fields: Any) -> BaseModel:
    """A scenario's validated config built from code: `configure("commons", fishers=8)`.

    `scenario` is a registered name, a `module:Class` / `path/to/file.py:Class` reference or a
    `SocietyModel` subclass.

    Raises `sim.errors.UsageError` naming the field and what is allowed when a value is bad.
    """
    return validate_config(get_scenario(scenario).Config, fields)


def spec(
    scenario: Union[str, type],
    *,
    config_file: Union[str, Path, None] = None,
    seed: Optional[int] = None,
    policy: Optional[str] = None,
    ticks: Optional[int] = None,
    llm: Optional[Mapping[str, Any]] = None,
    sets: Sequence[str] = (),
    **fields: Any,
) -> RunSpec:
    """A validated RunSpec: a config file, then `sets` ("key=value"), then `fields`, then the flags.

    `fields` may be nested mappings (`population=[{...}]`, `llm` settings go in `llm`). `scenario` is a
    name, a reference or a class; the spec stores a reference a later process can load (see
    `scenarios.reference_of`).
    """
    return build_spec(scenario, config_file=str(config_file) if config_file else None, sets=sets, seed=seed,
                      policy=policy, ticks=ticks, llm=llm, overrides=fields)


@dataclass
class Result:
    """A stored run: its id and outcome, and its tables as DataFrames (read lazily from the store)."""

    run_id: str
    scenario: str
    status: str
    ticks: int
    metrics: dict[str, Optional[float]]
    reason: Optional[str]
    fallbacks: int
    store: Store = field(repr=False)

    @cached_property
    def _frames(self) -> dict[str, pd.DataFrame]:
        return run_frames(self.store, self.run_id)

    @property
    def spec(self) -> RunSpec:
        """The RunSpec the run was made from (re-running it reproduces the run)."""
        return RunSpec.model_validate(self.store.get_run(self.run_id).spec)

    @property
    def per_tick(self) -> pd.DataFrame:
        """One row per tick, indexed by tick, one column per per-tick metric."""
        ticks = self._frames["ticks"]
        cols = {c: c[len("metric_"):] for c in ticks.columns if c.startswith("metric_")}
        return ticks[["tick", *cols]].rename(columns=cols).set_index("tick")

    @property
    def steps(self) -> pd.DataFrame:
        """Every agent step: tick, agent, phase, action, reward, fallback, decided_by, ..."""
        return self._frames["agent_steps"]

    @property
    def events(self) -> pd.DataFrame:
        """Every event (messages, trades, posts, sanctions, norm statements, ...)."""
        return self._frames["events"]

    @property
    def llm_calls(self) -> pd.DataFrame:
        """Every LLM call with its prompt, answer, tokens and whether the cache served it."""
        return self._frames["llm_calls"]

    def __repr__(self) -> str:
        return (f"Result(run_id={self.run_id!r}, scenario={self.scenario!r}, status={self.status!r}, "
                f"ticks={self.ticks}, fallbacks={self.fallbacks})")


def run(
    scenario: Union[str, type, RunSpec],
    *,
    db: Union[str, Store, None] = None,
    config_file: Union[str, Path, None] = None,
    seed: Optional[int] = None,
    policy: Optional[str] = None,
    ticks: Optional[int] = None,
    llm: Optional[Mapping[str, Any]] = None,
    progress: Optional[Callable[[int, int, Any], None]] = None,
    **fields: Any,
) -> Result:
    """Run a scenario to its end, stored in `db`, and return its Result.

    `scenario` is a registered name, a `module:Class` / `path/to/file.py:Class` reference or a
    `SocietyModel` subclass (with config `fields`, a `config_file`, `seed`, `policy`,
    `ticks`, `llm` settings) or a ready RunSpec. A failed run raises `sim.RunFailed`
    (its committed ticks stay stored); bad input raises `sim.UsageError` and stores nothing.
    `progress(tick, total, record)` is called after every committed tick.
    """
    if isinstance(scenario, RunSpec):
        if config_file or seed is not None or policy or ticks is not None or llm or fields:
            raise TypeError("run(spec) takes the spec as it is: build a new one with sim.spec(...) to change it")
        the_spec = scenario
    else:
        the_spec = spec(scenario, config_file=config_file, seed=seed, policy=policy, ticks=ticks, llm=llm, **fields)
    preflight(the_spec)  # a bad model path or chat class is bad input: found before anything is stored
    store = _open(db, create=True)
    try:
        r = execute(the_spec, store, progress=progress)
    finally:
        if not isinstance(db, Store):  # opened here: closed, so runs.db alone holds the run (its WAL folded in)
            store.close()
    return Result(r.run_id, r.scenario, r.status, r.ticks, r.metrics, r.reason, r.fallbacks, store)


def load_run(run_id: str, db: Union[str, Store, None] = None) -> Result:
    """A stored run by id (or unique prefix) as a Result."""
    store = _open(db, create=False)
    row = store.get_run(run_id)
    return Result(row.id, row.scenario, row.status, row.ticks, dict(row.final_metrics or {}), row.reason,
                  store.fallback_count(row.id), store)


def runs(db: Union[str, Store, None] = None, *, scenario: Optional[str] = None) -> pd.DataFrame:
    """Every stored run, one row each: id, scenario, seed, policy, status, ticks, created, final metrics."""
    store = _open(db, create=False)
    rows = []
    for r in store.list_runs():
        if scenario is not None and r.scenario != scenario:
            continue
        rows.append({"run_id": r.id, "scenario": r.scenario, "seed": r.seed, "policy": r.policy, "status": r.status,
                     "ticks": r.ticks, "origin": r.origin, "sweep_id": r.sweep_id, "created_at": r.created_at,
                     **{f"metric_{k}": v for k, v in (r.final_metrics or {}).items()}})
    return pd.DataFrame(rows)


def load_sweep(sweep_id: str, db: Union[str, Store, None] = None) -> pd.DataFrame:
    """A sweep's runs, one row each, with its grid's fields as columns (`frame.attrs['keys']`) and final metrics."""
    frame, keys = sweep_frame(_open(db, create=False), sweep_id)
    frame.attrs["keys"] = list(keys)
    return frame


def probe(
    scenario: Union[str, type],
    *,
    db: Union[str, Store, None] = None,
    probes: Sequence[str] = (),
    seeds: int = DEFAULT_SEEDS,
    paraphrases: int = 0,
    seed: Optional[int] = None,
    policy: str = "llm",
    llm: Optional[Mapping[str, Any]] = None,
    **fields: Any,
) -> ProbeReport:
    """Run the scenario's validity probes (`societas probe`): does a decision respond to the variable the paper's
    finding depends on? Stored in `db` as a run of origin `probe`; returns the report (`.results`: per probe the
    mean response at each level, the paired effect with its 95% interval, `responds`, its controls' readings and
    `valid`; with `paraphrases=K`, the effect under K rewordings of the prompt and `flips`). See docs/probes.md."""
    the_spec = spec(scenario, seed=seed, policy=policy, llm=llm, **fields)
    preflight(the_spec)
    store = _open(db, create=True)
    try:
        return run_probes(the_spec, store, names=probes, seeds=seeds, paraphrases=paraphrases)
    finally:
        if not isinstance(db, Store):
            store.close()



def interview(run_id: str, agent: int, question: str, *, tick: Optional[int] = None, db: Union[str, Store, None] = None,
              choices: Optional[Sequence[str]] = None, likert: bool = False,
              max_tokens: int = DEFAULT_TOKENS) -> StudyReport:
    """Ask agent `agent` of stored run `run_id` `question` from its state at `tick` (default: the run's last), through
    the run's model for that agent (`societas interview`): the run is replayed from its cache up to the tick, exactly,
    and left unchanged. Stored as a run of origin `interview`; returns the report (`.rows[0]["answer"]`). A scripted
    agent cannot be interviewed (UsageError)."""
    store = _open(db, create=False)
    return _interview(store, store.get_run(run_id).id, agent, question, tick=tick, choices=choices, likert=likert,
                      max_tokens=max_tokens)


def survey(run_id: str, question: str, *, tick: Optional[int] = None, db: Union[str, Store, None] = None,
           choices: Optional[Sequence[str]] = None, likert: bool = False, group: Optional[str] = None,
           max_tokens: int = DEFAULT_TOKENS) -> pd.DataFrame:
    """Ask every LLM agent of stored run `run_id` (or those of `group`) `question` from their state at `tick`, one batch
    per model (`societas survey`); a Likert or choice answer is constrained like any decision. Stored as a run of
    origin `survey`; returns the answers, one row per agent (`frame.attrs`: the survey's run id, tick, counts)."""
    store = _open(db, create=False)
    report = _survey(store, store.get_run(run_id).id, question, tick=tick, choices=choices, likert=likert, group=group,
                     max_tokens=max_tokens)
    frame = pd.DataFrame(report.rows)
    frame.attrs.update(survey_id=report.run_id, run_id=report.source_id, tick=report.tick, counts=report.counts,
                       skipped_scripted=report.skipped)
    return frame


def survey_sweep(sweep_id: str, question: str, *, db: Union[str, Store, None] = None,
                 choices: Optional[Sequence[str]] = None, likert: bool = False, group: Optional[str] = None,
                 max_tokens: int = DEFAULT_TOKENS) -> SweepSurvey:
    """Survey every ended run of sweep `sweep_id` at its last tick (`societas survey --sweep`): `.rows`, one per agent
    asked with its run's condition (the sweep's grid values), and `.cells`, the answers per condition."""
    return _survey_sweep(_open(db, create=False), sweep_id, question, choices=choices, likert=likert, group=group,
                         max_tokens=max_tokens)
