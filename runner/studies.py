"""Interviews and surveys: ask a stored run's agents a question at a tick, without changing the run.

`interview(store, run, tick, agent, question)` asks one agent, `survey(store, run, tick, question, choices)` every
LLM agent (or a group) in one batch per model. An agent answers from its state at tick T, exactly: the run is
replayed from its LLM cache up to T (`state_at`: scripted decisions recomputed from their seeds, LLM decisions from
the cache only, each replayed tick compared with the stored one, nothing written), and the agent is asked with its
persona, its memory and feedback after tick T and the situation it last decided in ("what it saw": the context of
its last request up to T), through the run's backend for that agent (its group's model, sim.tick.models). A survey's
answer is constrained like any decision: `--choices` is a Choice, `--likert` the five-point Likert scale (scored 1-5),
else free text.

Each interview or survey is stored as a run of its own (origin `interview` or `survey`, its parent the run, its
branch tick T; one tick: the answers as agent steps, the calls with their prompts, the question and the table in
its state), like a validity probe, so asking again is answered from the cache and `societas replay` re-asks it from
the cache only. A scripted agent cannot be interviewed: its decisions are a strategy's, with no persona or memory
that a model could answer from (bad input, said as such).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from runner.backends import make_backends, run_models
from runner.config import validate_config
from runner.data import DATA_KEY, check_data
from runner.execution import RunFailed, execute, versions
from runner.plans import FreshRun, config_schedule
from scenarios.registry import get_scenario
from sim.contracts.backend import Backend, CallRecord, ReplayMode
from sim.core.contracts import Decision, DecisionColumns, DecisionRequest, RequestBatch
from sim.core.errors import UsageError
from sim.core.interrupts import shielded
from sim.core.records import AgentStepRecord, TickRecord
from sim.core.spaces import Choice, Space, Text
from sim.core.spec import RunSpec
from sim.core.text import quote
from sim.reward.rewards import describe_feedback
from sim.store.dry import DryStore
from sim.store.snapshots import diff_ticks, snapshot_of
from sim.store.store import Store
from sim.store.tables import Run
from sim.tick.broker import DecisionBroker
from sim.tick.model import SocietyModel
from sim.tick.models import model_holders

ORIGINS = ("interview", "survey")
#: the phase name of a study's request (and so of its cache key): distinct from every scenario phase
PHASE = {"interview": "interview", "survey": "survey"}
LIKERT = ("strongly disagree", "disagree", "neither agree nor disagree", "agree", "strongly agree")
MAX_QUESTION = 1000
MAX_CHOICES = 20
DEFAULT_TOKENS = 60


class StudyFailed(RuntimeError):
    """The run could not be rebuilt at the tick (its replay from the cache differed or missed), or the model failed."""


@dataclass
class AgentState:
    """A stored run's world after tick `tick`, rebuilt by replaying it, and what each LLM agent last saw."""

    run: Run
    spec: RunSpec
    tick: int
    model: SocietyModel
    seen: dict[int, DecisionRequest]


@dataclass
class StudyReport:
    """An interview's or survey's answers: one row per agent asked (agent, group, backend, model, answer, score,
    fallback, cached), stored as run `run_id` (origin `interview` / `survey`) of `source_id` at `tick`."""

    run_id: str
    kind: str
    source_id: str
    tick: int
    question: str
    choices: Optional[list[str]]
    rows: list[dict[str, Any]]
    skipped: int = 0  # scripted agents a survey did not ask
    duration_s: float = 0.0
    counts: dict[str, int] = field(default_factory=dict)  # a choice survey: answers per option (fallbacks left out)

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "kind": self.kind, "source_id": self.source_id, "tick": self.tick,
                "question": self.question, "choices": self.choices, "skipped_scripted": self.skipped,
                "counts": self.counts, "duration_s": self.duration_s, "answers": self.rows}


# ----- the state at a tick ------------------------------------------------------------------------------------------
class _Witness(Backend):
    """An LLM backend as it is, remembering each agent's last request: what the agent last saw."""

    def __init__(self, inner: Backend, seen: dict[int, DecisionRequest]) -> None:
        self.inner, self.seen = inner, seen
        self.name, self.concurrent = inner.name, inner.concurrent

    def decide_batch(self, requests: Sequence[DecisionRequest]) -> list[Decision]:
        for r in requests:
            self.seen[r.agent_id] = r
        return self.inner.decide_batch(requests)

    def decide_columns(self, batch: RequestBatch) -> Optional[DecisionColumns]:
        return None  # (request by request: each is remembered)

    def bind(self, run_id: str, spec: RunSpec) -> None:
        self.inner.bind(run_id, spec)

    def drain_calls(self) -> list[CallRecord]:
        return self.inner.drain_calls()


class _Rebuilt(FreshRun):
    """A replay that stores nothing and keeps its model: each tick is compared with the stored one as it is made."""

    def __init__(self, store: Store, run: Run) -> None:
        super().__init__(origin="replay", schedule=config_schedule(store, run), drop_if_bad_input=False)
        self.store, self.source = store, run.id
        self.model: Optional[SocietyModel] = None

    def open(self, store: Any, spec: RunSpec, versions: dict[str, str], backends: str) -> str:
        return "(not stored)"

    def attach(self, model: SocietyModel) -> None:
        super().attach(model)
        self.model = model

    def commit(self, record: TickRecord) -> bool:
        super().commit(record)
        problem = diff_ticks(self.store.tick_snapshots(self.source, record.tick).get(record.tick), snapshot_of(record))
        if problem:
            raise StudyFailed(f"the replay of tick {record.tick} does not match the stored run: {problem}")
        return False


def source_run(store: Store, run_id: str, tick: Optional[int]) -> tuple[Run, int]:
    """The run to ask and the tick (default: its last committed one); UsageError for a run with nothing to ask."""
    run = store.get_run(run_id)
    if run.origin in ("probe", *ORIGINS):
        raise UsageError(f"run {run.id} is a {run.origin} (its answers are stored in it): ask the run it was made of"
                         + (f", {run.parent_id}" if run.parent_id else ""))
    if run.ticks == 0:
        raise UsageError(f"run {run.id} has no committed tick: its agents have nothing to answer from yet")
    tick = run.ticks if tick is None else tick
    if isinstance(tick, bool) or not isinstance(tick, int) or not 1 <= tick <= run.ticks:
        raise UsageError(f"bad value for '--tick': {tick!r}; run {run.id} has committed ticks 1..{run.ticks}")
    return run, tick


def state_at(store: Store, run: Run, tick: int) -> AgentState:
    """`run`'s world after `tick`, rebuilt exactly: replayed from its LLM cache (no model is loaded), every replayed
    tick compared with the stored one, nothing written. StudyFailed when the replay cannot be made or differs."""
    spec = RunSpec.model_validate(run.spec)
    cls = get_scenario(spec.scenario)
    check_data((run.versions or {}).get(DATA_KEY), validate_config(cls.Config, run.spec["config"]))
    dry = DryStore(store)
    seen: dict[int, DecisionRequest] = {}
    backends = make_backends(spec, cls, dry, replay=ReplayMode())
    backends = {name: _Witness(b, seen) if name.split(":")[0] == "llm" else b for name, b in backends.items()}
    plan = _Rebuilt(store, run)
    try:
        execute(spec, dry, plan, backends=backends, stop_after=tick)
    except RunFailed as exc:
        raise StudyFailed(f"cannot rebuild run {run.id} at tick {tick} from its cache: {exc.reason}") from None
    assert plan.model is not None
    if plan.model.tick != tick:
        raise StudyFailed(f"run {run.id} ended at tick {plan.model.tick} when replayed, before tick {tick}")
    return AgentState(run, spec, tick, plan.model, seen)


# ----- asking -------------------------------------------------------------------------------------------------------
def answer_space(choices: Optional[Sequence[str]], likert: bool, max_tokens: int) -> tuple[Space, Any]:
    """The space an answer must lie in and its default (a fallback's value): a Choice of `choices`, the Likert scale,
    or Text of `max_tokens`. UsageError for bad choices."""
    if likert and choices:
        raise UsageError("--likert is a set of choices of its own: give --likert or --choices, not both")
    if likert:
        return Choice(list(LIKERT)), LIKERT[2]
    if choices:
        options = [c.strip() for c in choices]
        if any(not c for c in options) or len(set(options)) != len(options):
            raise UsageError(f"bad value for '--choices': options must be distinct and non-empty (got {list(choices)[:8]})")
        if not 2 <= len(options) <= MAX_CHOICES:
            raise UsageError(f"bad value for '--choices': give 2 to {MAX_CHOICES} options, got {len(options)}")
        if any(len(c) > 80 or "\n" in c for c in options):
            raise UsageError("bad value for '--choices': an option is one line of at most 80 characters")
        return Choice(options), options[0]
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 1 <= max_tokens <= 512:
        raise UsageError(f"bad value for '--max-tokens': a whole number from 1 to 512, got {max_tokens!r}")
    return Text(max_tokens=max_tokens), ""


def check_question(question: Any) -> str:
    """The question, or UsageError: non-empty text of at most MAX_QUESTION characters."""
    if not isinstance(question, str) or not question.strip():
        raise UsageError("give the question to ask (a non-empty text)")
    if len(question) > MAX_QUESTION:
        raise UsageError(f"the question is {len(question)} characters long; at most {MAX_QUESTION}")
    return question.strip()


def _request(state: AgentState, agent: Any, question: str, space: Space, default: Any, kind: str) -> DecisionRequest:
    """The agent's request for the question: its persona, memory and feedback after the tick, what it last saw, and
    the question (quoted: a question never changes the prompt's structure)."""
    model, seen = state.model, state.seen.get(agent.unique_id)
    asked = f"{'An interviewer' if kind == 'interview' else 'A survey'} asks you: {quote(question, MAX_QUESTION)}"
    return DecisionRequest(
        agent_id=agent.unique_id, tick=state.tick, phase=PHASE[kind], space=space, default=default, backend=agent.backend,
        strategy=agent.strategy, context=seen.context if seen is not None else "", question=asked,
        persona=agent.persona, memory=agent.memory.render(question, noun=model.memory_noun),
        feedback=describe_feedback(agent.feedback), own_context=seen.own_context if seen is not None else "",
        seed=model.seeds.seed_for(state.tick, agent.unique_id, PHASE[kind]))


def _scripted_refusal(agent_id: int, policy: str) -> UsageError:
    return UsageError(f"agent {agent_id} is {policy}: a scripted agent cannot be interviewed (its decisions are a "
                      "strategy's, with no persona or memory a model could answer from); ask an LLM agent of a run "
                      "with --policy llm")


def _groups(state: AgentState) -> dict[str, str]:
    """backend -> who plays it ("group 1", "customers", "cool"...)."""
    config = state.model.config
    return {b: ", ".join(names) for b, names in model_holders(config, state.spec.policy).items()}


def _ask(store: Store, state: AgentState, agents: Sequence[Any], question: str, space: Space, default: Any,
         kind: str) -> tuple[list[DecisionRequest], list[Decision], list[CallRecord], Mapping[str, Any]]:
    """Each agent's answer, one batch per backend (model), through the run's backends behind the store's cache."""
    requests = [_request(state, a, question, space, default, kind) for a in agents]
    backends = make_backends(state.spec, type(state.model), store)
    used = {r.backend for r in requests}
    backends = {name: b for name, b in backends.items() if name in used}
    for b in backends.values():
        b.bind("(study)", state.spec)
    try:
        decided = DecisionBroker(backends).decide_all(requests)
    except UsageError:
        raise
    except Exception as exc:  # noqa: BLE001 - the model could not answer (unreachable server, load failure)
        raise StudyFailed(f"the model could not answer: {type(exc).__name__}: {exc}") from exc
    calls = [c for b in backends.values() for c in b.drain_calls()]
    return requests, decided, calls, backends


def _rows(state: AgentState, requests: Sequence[DecisionRequest], decided: Sequence[Decision],
          calls: Sequence[CallRecord], space: Space) -> list[dict[str, Any]]:
    groups = _groups(state)
    labels = _model_labels(state)
    by_agent = {c["agent_id"]: c for c in calls}
    rows = []
    for r, d in zip(requests, decided):
        call = by_agent.get(r.agent_id, {})
        score = (LIKERT.index(d.value) + 1 if isinstance(space, Choice) and tuple(space.options) == LIKERT
                 and not d.fallback else None)
        rows.append({"agent_id": r.agent_id, "group": groups.get(r.backend, ""), "backend": r.backend,
                     "model": labels.get(r.backend, call.get("model_id", "")), "answer": None if d.fallback else d.value,
                     "score": score, "raw": d.raw or "", "fallback": d.fallback, "reason": d.reason,
                     "cached": bool(call.get("cache_hit", False))})
    return rows


def _model_labels(state: AgentState) -> dict[str, str]:
    """backend -> its model in a few words (`LLMSpec.label`)."""
    return {name: llm.label() for name, llm in run_models(state.spec).items()}


def _store(store: Store, state: AgentState, kind: str, question: str, choices: Optional[list[str]],
           requests: Sequence[DecisionRequest], decided: Sequence[Decision], calls: Sequence[CallRecord],
           rows: list[dict[str, Any]], started: float, extra: Mapping[str, Any]) -> str:
    """The study as a run of origin `kind`: one tick holding the answers (agent steps), the calls and the table."""
    backends = "+".join(sorted({r.backend.split(":")[0] for r in requests}))
    run_id = store.create_run(state.spec, versions(), origin=kind, parent_id=state.run.id, branch_tick=state.tick,
                              backends=backends)
    store.set_initial(run_id, {})  # a study starts from no world of its own
    steps = [AgentStepRecord(r.agent_id, {PHASE[kind]: d.value}, 0.0, 0.0, d.fallback, r.backend, d.reason, None)
             for r, d in zip(requests, decided)]
    counts = _counts(rows, choices)
    metrics = {"asked": float(len(rows)), "fallbacks": float(sum(r["fallback"] for r in rows)),
               **{f"share.{k}": v / max(1, sum(counts.values())) for k, v in counts.items()}}
    scores = [r["score"] for r in rows if r["score"] is not None]
    if scores:
        metrics["mean_score"] = sum(scores) / len(scores)
    state_data = {"kind": kind, "question": question, "tick": state.tick, "source_id": state.run.id, "choices": choices,
                  "counts": counts, "answers": rows, **extra}
    with shielded():  # stored whole or not at all
        store.record_tick(run_id, TickRecord(1, metrics, state_data, steps, []), calls,
                          duration_s=time.perf_counter() - started)
        store.finish_run(run_id, "finished", None, time.perf_counter() - started, metrics)
    return run_id


def _counts(rows: Sequence[Mapping[str, Any]], choices: Optional[list[str]]) -> dict[str, int]:
    if not choices:
        return {}
    counts = dict.fromkeys(choices, 0)
    for r in rows:
        if not r["fallback"] and r["answer"] in counts:
            counts[r["answer"]] += 1
    return counts


def interview(store: Store, run_id: str, agent_id: int, question: str, *, tick: Optional[int] = None,
              max_tokens: int = DEFAULT_TOKENS, choices: Optional[Sequence[str]] = None, likert: bool = False,
              state: Optional[AgentState] = None) -> StudyReport:
    """Ask agent `agent_id` of run `run_id` `question` from its state at `tick` (default: the run's last); stored as a
    run of origin `interview`. UsageError for bad input (a scripted agent, an agent not there at the tick...)."""
    question = check_question(question)
    space, default = answer_space(choices, likert, max_tokens)
    run, tick = source_run(store, run_id, tick)
    _refuse_scripted_run(run)
    known = {a.agent_id: a for a in store.run_agents(run.id)}  # (said before the replay, where the run lists its agents)
    if known and agent_id not in known:
        raise UsageError(f"bad value for '--agent': run {run.id} has no agent {agent_id}; its agents: {_ids(sorted(known))}")
    if agent_id in known and known[agent_id].policy not in (None, "llm"):
        raise _scripted_refusal(agent_id, str(known[agent_id].policy))
    state = state or state_at(store, run, tick)
    agent = state.model.agent_map().get(agent_id)
    if agent is None:
        present = sorted(state.model.agent_map())
        raise UsageError(f"bad value for '--agent': run {run.id} has no agent {agent_id} at tick {tick}; agents there: "
                         f"{_ids(present)}")
    if agent.policy != "llm":
        raise _scripted_refusal(agent_id, agent.policy)
    started = time.perf_counter()
    requests, decided, calls, _ = _ask(store, state, [agent], question, space, default, "interview")
    rows = _rows(state, requests, decided, calls, space)
    chosen = list(space.options) if isinstance(space, Choice) else None
    study_id = _store(store, state, "interview", question, chosen, requests, decided, calls, rows, started,
                      {"agent_id": agent_id, "max_tokens": max_tokens if chosen is None else None, "likert": likert})
    return StudyReport(study_id, "interview", run.id, tick, question, chosen, rows, 0, time.perf_counter() - started,
                       _counts(rows, chosen))


def survey(store: Store, run_id: str, question: str, *, tick: Optional[int] = None,
           choices: Optional[Sequence[str]] = None, likert: bool = False, group: Optional[str] = None,
           max_tokens: int = DEFAULT_TOKENS, state: Optional[AgentState] = None) -> StudyReport:
    """Ask every LLM agent of run `run_id` present at `tick` (default: the run's last), or those of `group` (a group
    or market side with a model of its own, by its name; a backend `llm:K`; or a role), `question` in one batch per
    model; stored as a run of origin `survey`. Scripted agents are not asked (counted in `skipped`)."""
    question = check_question(question)
    space, default = answer_space(choices, likert, max_tokens)
    run, tick = source_run(store, run_id, tick)
    _refuse_scripted_run(run)
    state = state or state_at(store, run, tick)
    agents = sorted(state.model.agent_map().values(), key=lambda a: a.unique_id)
    if group is not None:
        agents = _of_group(state, agents, group)
    asked = [a for a in agents if a.policy == "llm"]
    if not asked:
        raise UsageError(f"run {run.id} has no LLM agent{' in group ' + repr(group) if group else ''} at tick {tick}: "
                         "a scripted agent cannot be interviewed (its decisions are a strategy's, with no persona or "
                         "memory a model could answer from)")
    started = time.perf_counter()
    requests, decided, calls, _ = _ask(store, state, asked, question, space, default, "survey")
    rows = _rows(state, requests, decided, calls, space)
    chosen = list(space.options) if isinstance(space, Choice) else None
    study_id = _store(store, state, "survey", question, chosen, requests, decided, calls, rows, started,
                      {"group": group, "likert": likert, "skipped_scripted": len(agents) - len(asked)})
    return StudyReport(study_id, "survey", run.id, tick, question, chosen, rows, len(agents) - len(asked),
                       time.perf_counter() - started, _counts(rows, chosen))


def _refuse_scripted_run(run: Run) -> None:
    """A run no LLM agent plays: nobody to interview (said before anything is replayed)."""
    spec = RunSpec.model_validate(run.spec)
    if not spec.uses_llm:
        raise UsageError(f"run {run.id} is scripted (policy {spec.policy}): a scripted agent cannot be interviewed (its "
                         "decisions are a strategy's, with no persona or memory a model could answer from); interview "
                         "the agents of a run with --policy llm")
    if spec.llm.provider == "env":
        raise UsageError(f"run {run.id}'s LLM decisions were made by a policy outside, through the environment: there is "
                         "no model here to answer for its agents")


def _of_group(state: AgentState, agents: Sequence[Any], group: str) -> list[Any]:
    holders = model_holders(state.model.config, state.spec.policy)
    backends = {b for b, names in holders.items() if group in names} | ({group} if group in holders else set())
    chosen = [a for a in agents if a.backend in backends or type(a).__name__.lower() == group]
    if not chosen:
        config = state.model.config
        scripted = {g.name or f"group {k + 1}": g.policy or state.spec.policy
                    for k, g in enumerate(config.population or ())}
        if group in scripted and scripted[group] != "llm":
            raise UsageError(f"group {group[:40]!r} of run {state.run.id} is {scripted[group]}: a scripted agent cannot "
                             "be asked (its decisions are a strategy's); ask a group of LLM agents")
        names = sorted({n for names in holders.values() for n in names} | set(holders)
                       | {type(a).__name__.lower() for a in agents})
        raise UsageError(f"bad value for '--group': {group[:40]!r}; groups of run {state.run.id}: {', '.join(names)}")
    return chosen


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(map(str, ids[:20])) + (f" ... ({len(ids)} in all)" if len(ids) > 20 else "")


# ----- replaying a study --------------------------------------------------------------------------------------------
def replay_study(store: Store, study: Run) -> dict[str, Any]:
    """Ask a stored interview or survey again with its model kept off (answers from the cache only) and compare the
    answers with the stored ones: the report `societas replay` prints. Nothing is written."""
    tick_row = store.ticks(study.id)
    if not tick_row:
        return {"run_id": study.id, "replay_run_id": None, "ticks": 0, "matched": False,
                "mismatches": [{"tick": 1, "what": "the study stored no answers"}], "incomplete": study.status}
    data = tick_row[0].state
    source, tick = source_run(store, data["source_id"], data["tick"])
    state = state_at(store, source, tick)
    agents = [state.model.agent_map()[r["agent_id"]] for r in data["answers"]]
    choices = data.get("choices")
    likert = bool(data.get("likert"))
    space, default = answer_space(None if likert else choices, likert, data.get("max_tokens") or DEFAULT_TOKENS)
    requests = [_request(state, a, data["question"], space, default, data["kind"]) for a in agents]
    backends = make_backends(state.spec, type(state.model), DryStore(store), replay=ReplayMode())
    for b in backends.values():
        b.bind("(study replay)", state.spec)
    mismatches = []
    try:
        decided = DecisionBroker({n: b for n, b in backends.items() if n in {r.backend for r in requests}}).decide_all(requests)
    except Exception as exc:  # noqa: BLE001 - a cache miss is the finding
        decided = []
        mismatches.append({"tick": 1, "what": f"{type(exc).__name__}: {exc}"})
    for r, d, stored in zip(requests, decided, data["answers"]):
        value = None if d.fallback else d.value
        if value != stored["answer"] or d.fallback != stored["fallback"]:
            mismatches.append({"tick": 1, "what": f"agent {r.agent_id} answered {value!r}, stored {stored['answer']!r}"})
    return {"run_id": study.id, "replay_run_id": None, "ticks": 1, "matched": not mismatches, "mismatches": mismatches,
            "incomplete": None}


# ----- a survey across a sweep's conditions -------------------------------------------------------------------------
@dataclass
class SweepSurvey:
    """A survey of every ended run of a sweep at its last tick: one row per agent asked, with its run's condition (the
    sweep's grid values) and seed; `cells` summarises each condition (answers per choice, or the mean Likert score)."""

    sweep_id: str
    question: str
    keys: list[str]
    reports: list[StudyReport]
    rows: list[dict[str, Any]]
    cells: list[dict[str, Any]]
    skipped_runs: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"sweep_id": self.sweep_id, "question": self.question, "keys": self.keys,
                "surveys": [r.run_id for r in self.reports], "skipped_runs": self.skipped_runs, "cells": self.cells,
                "answers": self.rows}


def survey_sweep(store: Store, sweep_id: str, question: str, *, choices: Optional[Sequence[str]] = None,
                 likert: bool = False, group: Optional[str] = None, max_tokens: int = DEFAULT_TOKENS) -> SweepSurvey:
    """`survey` each ended run of sweep `sweep_id` (finished or collapsed) at its last tick: one table across the
    sweep's conditions. Runs with no LLM agent (or none of `group`) are skipped and named."""
    question = check_question(question)
    answer_space(choices, likert, max_tokens)  # bad choices: said before any run is replayed
    row = store.get_sweep(sweep_id)
    keys = list(row.definition.get("grid", {}))
    runs = [r for r in store.sweep_runs(row.id) if r.status in ("finished", "collapsed") and r.ticks > 0]
    if not runs:
        raise UsageError(f"sweep {row.id} has no ended run to survey yet")
    reports, rows, skipped = [], [], []
    for run in runs:
        if not RunSpec.model_validate(run.spec).uses_llm:
            skipped.append(run.id)
            continue
        try:
            report = survey(store, run.id, question, choices=choices, likert=likert, group=group, max_tokens=max_tokens)
        except UsageError:
            if group is None:
                raise
            skipped.append(run.id)
            continue
        reports.append(report)
        condition = {k: _grid_value(run.spec, k) for k in keys}
        rows.extend({"run_id": run.id, "seed": run.seed, **condition, "survey_id": report.run_id, **a}
                    for a in report.rows)
    if not reports:
        raise UsageError(f"no run of sweep {row.id} has LLM agents{' in group ' + repr(group) if group else ''}: a "
                         "scripted agent cannot be interviewed")
    return SweepSurvey(row.id, question, keys, reports, rows, _cells(rows, keys, reports[0].choices), skipped)


def _grid_value(spec: Mapping[str, Any], key: str) -> Any:
    node: Any = {**spec.get("config", {}), "llm": spec.get("llm", {})}
    for part in key.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node if not isinstance(node, (dict, list)) else str(node)


def _cells(rows: Sequence[Mapping[str, Any]], keys: Sequence[str], choices: Optional[list[str]]) -> list[dict[str, Any]]:
    """Per condition: runs, agents asked, fallbacks, and the answers per choice (shares) or the mean Likert score."""
    cells: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        cells.setdefault(tuple(r[k] for k in keys), []).append(r)
    out = []
    for cell, part in cells.items():
        answered = [r for r in part if not r["fallback"]]
        rec: dict[str, Any] = {**dict(zip(keys, cell)), "runs": len({r["run_id"] for r in part}), "asked": len(part),
                               "fallbacks": len(part) - len(answered)}
        if choices:
            for c in choices:
                rec[c] = sum(r["answer"] == c for r in answered) / len(answered) if answered else None
        scores = [r["score"] for r in answered if r["score"] is not None]
        if scores:
            rec["mean_score"] = sum(scores) / len(scores)
        out.append(rec)
    return out
