"""Sweeps: a grid of config overrides x seeds, every combination run once into one store.

A sweep file (YAML)::

    scenario: commons
    base: {months: 12, fishers: 5}        # config fields for every run
    grid: {sanctions: [false, true], strategy: [sustainable, greedy]}   # key -> values
    seeds: 5                               # a count (0..n-1) or a list of seeds
    policy: scripted                       # optional; also optional: llm: {...}, ticks: N

The sweep id is a hash of the parsed content (not of comments or layout), and every run's id
is a hash of (sweep id, run spec): running the same file again finds its runs, skips those
that ended (finished or collapsed), resumes those that failed or were killed (sim.resume), and
leaves alone those still running in a live process. Executors: `local` (a process pool) and
`ray` (a Ray cluster, or a local Ray instance), every worker writing to the same store.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError
from sqlmodel import Session, select

from sim.config import _absolute_refs, _check_population, _deep_merge, describe_error, load_yaml, validate_config
from sim.contracts import CONTRACT, LLMSpec, RunSpec
from sim.errors import UsageError
from sim.store import Run, Store, SweepRow

KEYS = ("scenario", "base", "grid", "seeds", "policy", "llm", "ticks")
ENDED = ("finished", "collapsed")


# ----- the sweep file -------------------------------------------------------------------------------------
def load_sweep(path: str | Path) -> dict[str, Any]:
    """Read and validate a sweep file; UsageError naming the file and the key otherwise."""
    return parse_sweep(load_yaml(path), str(path), base_dir=Path(path).parent)


def parse_sweep(data: dict[str, Any], where: str = "sweep", base_dir: Optional[Path] = None) -> dict[str, Any]:
    """The normalised definition: every key present, seeds as a list, grid values as lists.

    `scenario` is a registered name or a reference (`module:Class`, `file.py:Class`: a relative
    path is taken from `base_dir`, the sweep file's folder); it is stored as `scenarios.reference_of` makes it.
    """
    from scenarios import REGISTRY, is_reference, reference_of

    unknown = [k for k in data if k not in KEYS]
    if unknown:
        raise UsageError(f"{where}: unknown key {unknown[0]!r}; valid keys: {', '.join(KEYS)}")
    scenario = data.get("scenario")
    if not isinstance(scenario, str) or (scenario not in REGISTRY and not is_reference(scenario)):
        raise UsageError(f"{where}: bad value for 'scenario': {scenario!r}; valid: {', '.join(sorted(REGISTRY))}, "
                         "or a reference module:Class or path/to/file.py:Class")
    try:
        scenario = reference_of(scenario, base=base_dir)
    except UsageError as exc:
        raise UsageError(f"{where}: bad value for 'scenario': {exc}") from None
    base = data.get("base") or {}
    grid = data.get("grid") or {}
    if not isinstance(base, dict):
        raise UsageError(f"{where}: 'base' must be a mapping of config field: value")
    if not isinstance(grid, dict) or any(not isinstance(v, list) or not v for v in grid.values()):
        raise UsageError(f"{where}: 'grid' must map each config field to a non-empty list of values")
    seeds = data.get("seeds", 1)
    if isinstance(seeds, int) and not isinstance(seeds, bool) and 1 <= seeds <= 100_000:
        seeds = list(range(seeds))
    if (not isinstance(seeds, list) or not seeds or len(set(seeds)) != len(seeds)
            or any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds)):
        raise UsageError(f"{where}: bad value for 'seeds': a count (1..100000) or a list of distinct non-negative integers")
    policy = data.get("policy", "scripted")
    if policy not in ("scripted", "llm"):
        raise UsageError(f"{where}: bad value for 'policy': {policy!r}; valid: scripted, llm")
    # strategy and template references in the file are relative to the file, like its scenario
    base = _absolute_refs(base, base_dir)
    grid = {k: [_absolute_refs(_nest({k: v}), base_dir) for v in values] for k, values in grid.items()}
    grid = {k: [_get_path(v, k) for v in values] for k, values in grid.items()}
    llm_block = data.get("llm") or {}
    if isinstance(llm_block, dict):
        llm_block = _absolute_refs({"llm": llm_block}, base_dir)["llm"]
    definition = {"scenario": scenario, "base": base, "grid": grid, "seeds": seeds, "policy": policy,
                  "llm": llm_block, "ticks": data.get("ticks")}
    expand(definition, where)  # every cell validates now, before anything is written
    return definition


def preflight_llm(definition: dict[str, Any], where: str = "sweep") -> None:
    """Refuse, before the sweep stores anything, a model, device or chat class that cannot be used here,
    as `societas run` does, instead of letting every run of the sweep fail in turn. For runs on this
    machine (a remote Ray cluster's workers have their own models and devices: not checked)."""
    from agents.llm.factory import preflight
    from scenarios import get_scenario
    from sim.runner import needs_llm

    checked: set[str] = set()
    for spec in expand(definition, where):
        llm = spec.llm  # what preflight reads: sampling settings (a grid over temperature) need no second check
        key = json.dumps([llm.provider, llm.model, llm.device, llm.cls, llm.args], sort_keys=True, default=str)
        if key in checked or not needs_llm(spec, get_scenario(spec.scenario)):
            continue
        checked.add(key)
        try:
            preflight(spec)
        except UsageError as exc:
            raise UsageError(f"{where}: {exc}") from None


def sweep_id(definition: dict[str, Any]) -> str:
    """A stable id for the sweep's content: the same file (even reformatted) gives the same id."""
    text = json.dumps(definition, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def cells(definition: dict[str, Any]) -> list[dict[str, Any]]:
    """Every combination of the grid's values, in the file's key order."""
    keys = list(definition["grid"])
    return [dict(zip(keys, combo)) for combo in itertools.product(*(definition["grid"][k] for k in keys))]


def _nest(flat: dict[str, Any]) -> dict[str, Any]:
    """`{"llm.temperature": 0}` -> `{"llm": {"temperature": 0}}` (grid keys may be dotted)."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        out = _deep_merge(out, _set_path(key, value))
    return out


def _get_path(data: dict[str, Any], key: str) -> Any:
    for part in key.split("."):
        data = data[part]
    return data


def _set_path(key: str, value: Any) -> dict[str, Any]:
    node: dict[str, Any] = {}
    root = node
    parts = key.split(".")
    for part in parts[:-1]:
        node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    return root


def spec_for(definition: dict[str, Any], cell: dict[str, Any], seed: int, where: str = "sweep",
             contract: int = CONTRACT) -> RunSpec:
    """The RunSpec of one (cell, seed): base, then the cell's overrides; validated like `societas run`.

    `contract` is the sweep's decision contract: the current one for a new sweep, the one it started
    under for a sweep being continued (its runs must stay comparable and keep their ids)."""
    from scenarios import get_scenario

    cls = get_scenario(definition["scenario"])
    data = _deep_merge(_nest(definition["base"]), _nest(cell))
    llm = _deep_merge(definition["llm"], data.pop("llm", {}) or {})
    for key in ("seed", "policy", "scenario", "ticks"):
        if key in data:
            raise UsageError(f"{where}: {key!r} is a sweep key, not a config field (put it at the top level)")
    if definition["ticks"] is not None:
        data[cls.horizon_field] = definition["ticks"]
    try:
        config = validate_config(cls.Config, data)
    except UsageError as exc:
        raise UsageError(f"{where}, cell {cell}: {exc}") from None
    try:
        llm_spec = LLMSpec.model_validate(llm)
    except ValidationError as exc:
        raise UsageError(f"{where}: {describe_error(exc, LLMSpec, 'llm.')}") from None
    _check_population(cls, config, definition["policy"])
    return RunSpec(scenario=definition["scenario"], config=config.model_dump(mode="json"), seed=seed,
                   policy=definition["policy"], llm=llm_spec, contract=contract)


def expand(definition: dict[str, Any], where: str = "sweep", contract: int = CONTRACT) -> list[RunSpec]:
    """Every run of the sweep, once each (duplicate cells collapse)."""
    specs: dict[str, RunSpec] = {}
    for cell in cells(definition):
        for seed in definition["seeds"]:
            spec = spec_for(definition, cell, seed, where, contract)
            specs.setdefault(spec.digest(), spec)
    return list(specs.values())


def run_id_for(sid: str, spec: RunSpec) -> str:
    return hashlib.sha256(f"{sid}:{spec.digest()}".encode()).hexdigest()[:12]


# ----- planning: what is left to do -------------------------------------------------------------------------------
@dataclass
class SweepPlan:
    sweep_id: str
    total: int
    todo: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)  # (run id, "new"|"resume", spec json)
    done_before: int = 0
    busy: int = 0  # running in a live process elsewhere
    url: str = ""


def prepare(store: Store, definition: dict[str, Any], source: Optional[str] = None) -> SweepPlan:
    """Record the sweep (once) and list the runs still to do."""
    from sim.resume import owner_alive

    sid = sweep_id(definition)
    now = datetime.now(timezone.utc)
    with Session(store.engine) as s:
        row = s.get(SweepRow, sid)
        # a sweep keeps the decision contract it started under (recorded with it; none recorded: 1)
        contract = CONTRACT if row is None else int((row.definition or {}).get("contract", 1))
        specs = expand(definition, contract=contract)
        if row is None:
            s.add(SweepRow(id=sid, scenario=definition["scenario"], definition={**definition, "contract": contract},
                           total=len(specs), source=source, created_at=now, updated_at=now))
        else:
            row.updated_at = now
            s.add(row)
        try:
            s.commit()
        except Exception:  # noqa: BLE001 - another driver recorded it at the same moment
            s.rollback()
        existing = {r.id: r for r in s.exec(select(Run).where(Run.sweep_id == sid)).all()}
    plan = SweepPlan(sid, len(specs), url=store.url)
    for spec in specs:
        rid = run_id_for(sid, spec)
        run = existing.get(rid)
        if run is None:
            plan.todo.append((rid, "new", spec.model_dump(mode="json")))
        elif run.status in ENDED:
            plan.done_before += 1
        elif run.status == "running" and owner_alive(run):
            plan.busy += 1
        else:
            plan.todo.append((rid, "resume", spec.model_dump(mode="json")))
    return plan


def get_sweep(store: Store, sid: str) -> SweepRow:
    """A sweep by id or unique prefix; UsageError otherwise."""
    with Session(store.engine) as s:
        row = s.get(SweepRow, sid)
        if row is None and sid:
            matches = s.exec(select(SweepRow).where(SweepRow.id.startswith(sid))).all()
            if len(matches) > 1:
                raise UsageError(f"sweep id prefix {sid!r} is ambiguous: {', '.join(m.id for m in matches)}")
            row = matches[0] if matches else None
    if row is None:
        raise UsageError(f"unknown sweep id {sid!r}; `societas sweep FILE` prints the id of the sweep it runs")
    return row


def status(store: Store, sid: str) -> dict[str, Any]:
    """Runs by status (`stale`: marked running but its process is gone), out of the sweep's total."""
    from sim.resume import owner_alive

    row = get_sweep(store, sid)
    with Session(store.engine) as s:
        runs = s.exec(select(Run).where(Run.sweep_id == row.id)).all()
    counts: dict[str, int] = {}
    for r in runs:
        key = "stale" if r.status == "running" and not owner_alive(r) else r.status
        counts[key] = counts.get(key, 0) + 1
    return {"sweep_id": row.id, "scenario": row.scenario, "source": row.source, "total": row.total,
            "statuses": counts, "pending": row.total - len(runs), "grid": row.definition.get("grid", {}),
            "seeds": len(row.definition.get("seeds", []))}


# ----- one run, in whichever worker ------------------------------------------------------------------------------------
@dataclass
class Outcome:
    run_id: str
    status: str
    reason: Optional[str] = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "reason": self.reason, "seconds": round(self.seconds, 3)}


_STORES: dict[str, Store] = {}


class _NewRunPlan:
    """execute()'s plan for a sweep's new run: its row gets the sweep's deterministic id and the sweep id."""

    earlier_duration = 0.0

    def __init__(self, run_id: str, sweep_id: str) -> None:
        self.run_id, self.sweep_id = run_id, sweep_id

    def open(self, store: Store, spec: RunSpec, versions: dict[str, str], backends: str) -> str:
        return store.create_run(spec, versions, sweep_id=self.sweep_id, backends=backends, run_id=self.run_id)

    def first_config(self, config: Any) -> Any:
        return config

    def attach(self, model: Any, backends: Any) -> None:
        pass

    def commit(self, record: Any, calls: Any) -> bool:
        return True


def run_one(url: str, sid: str, run_id: str, mode: str, spec_json: dict[str, Any],
            backend_hook: Optional[Callable[[dict[str, Any]], None]] = None) -> Outcome:
    """Run (or resume) one run of a sweep; never raises: failures come back as an Outcome."""
    from scenarios import get_scenario
    from sim.resume import resume_run
    from sim.runner import RunFailed, execute, make_backends

    started = time.perf_counter()
    try:
        store = _STORES.get(url)
        if store is None:
            store = _STORES[url] = Store(url)
        spec = RunSpec.model_validate(spec_json)
        if mode == "resume":
            result = resume_run(store, run_id, backend_hook=backend_hook)
        else:
            backends = make_backends(spec, get_scenario(spec.scenario), store)
            if backend_hook is not None:
                backend_hook(backends)
            result = execute(spec, store, backends=backends, plan=_NewRunPlan(run_id, sid))
        return Outcome(run_id, result.status, result.reason, time.perf_counter() - started)
    except RunFailed as exc:
        return Outcome(run_id, "failed", exc.reason, time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - e.g. another driver took the run meanwhile
        return Outcome(run_id, "error", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                       time.perf_counter() - started)


# ----- executors ----------------------------------------------------------------------------------------------------------
Progress = Callable[[int, Outcome], None]


def run_sweep(store: Store, plan: SweepPlan, *, executor: str = "local", address: Optional[str] = None,
              workers: Optional[int] = None, progress: Optional[Progress] = None) -> dict[str, Any]:
    """Run what is left of a sweep; returns a report (counts, statuses, runs per second)."""
    started = time.perf_counter()
    outcomes: list[Outcome] = []
    done = plan.done_before
    extra: dict[str, Any] = {}

    def record(outcome: Outcome) -> None:
        nonlocal done
        outcomes.append(outcome)
        done += 1
        if progress is not None:
            progress(done, outcome)

    if plan.todo:
        if executor == "ray":
            from sim.sweep_ray import run_on_ray

            extra = run_on_ray(plan, address=address, workers=workers, on_done=record)
        elif executor == "local":
            run_local(store, plan, workers=workers, on_done=record)
        else:
            raise UsageError(f"bad value for '--executor': {executor!r}; valid: local, ray")
    seconds = time.perf_counter() - started
    statuses: dict[str, int] = {}
    for o in outcomes:
        statuses[o.status] = statuses.get(o.status, 0) + 1
    return {"sweep_id": plan.sweep_id, "total": plan.total, "ran": len(outcomes), "skipped": plan.done_before,
            "busy_elsewhere": plan.busy, "statuses": statuses, "failed": sum(o.status in ("failed", "error") for o in outcomes),
            "seconds": round(seconds, 3), "runs_per_s": len(outcomes) / seconds if seconds > 0 and outcomes else 0.0,
            "errors": [o.to_json() for o in outcomes if o.status in ("failed", "error")][:20], **extra}


def run_local(store: Store, plan: SweepPlan, *, workers: Optional[int], on_done: Callable[[Outcome], None]) -> None:
    """A process pool (forkserver: workers start clean, with the engine preloaded); one worker runs inline."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    n = max(1, min(workers or os.cpu_count() or 1, len(plan.todo)))
    if n == 1:
        for rid, mode, spec in plan.todo:
            on_done(run_one(plan.url, plan.sweep_id, rid, mode, spec))
        return
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["sim.runner", "sim.resume", "sim.sweep", "scenarios"])
    store.engine.dispose()  # no pooled connection crosses into a worker
    pool = ProcessPoolExecutor(max_workers=n, mp_context=ctx)
    try:
        pending = {pool.submit(run_one, plan.url, plan.sweep_id, rid, mode, spec) for rid, mode, spec in plan.todo}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for f in finished:
                on_done(f.result())
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
