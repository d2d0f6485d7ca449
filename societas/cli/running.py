"""`societas run`, `resume`, `fork` and `probe`: commands that run a scenario (or its validity probes) and store it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
from rich.table import Table

from runner.limits import DEFAULT_SEEDS, MAX_PARAPHRASES
from societas.cli.app import DbOption, JsonOption, app, fail, fmt, open_store, out, reference_table, with_progress

if TYPE_CHECKING:  # pragma: no cover - for type checkers
    from runner.execution import RunResult
    from runner.probing import ProbeReport

# the flags `run` and `probe` share: how a spec is built and who answers for the LLM
ConfigOption = typer.Option(None, "--config", help="YAML file of config fields (and seed, policy, llm)")
SetOption = typer.Option([], "--set", help="override a config field: key=value (repeatable)")
ModelOption = typer.Option(None, "--model", help="local model: a model directory or .gguf file (default: embedded SmolLM2)")
LlmOption = typer.Option(None, "--llm", help="a LangChain chat model class, module:Class")
LlmArgOption = typer.Option([], "--llm-arg", help="constructor argument for --llm: key=value (repeatable)")
# the flags `run`, `resume` and `fork` share: where the local model's engine replicas run
ReplicasOption = typer.Option(None, "--replicas", help="local model: engine replicas as Ray actors, a tick's batch split "
                              "across them (llm.replicas)")
AddressOption = typer.Option(None, "--address", help="with replicas: the Ray cluster they run on (default: a local Ray "
                             "instance)")


@app.command()
def run(
    scenario: str = typer.Argument(..., help="registered scenario name (see `societas scenarios`), or your own class: "
                                   "path/to/file.py:Class or package.module:Class"),
    config: Optional[Path] = ConfigOption,
    set_: list[str] = SetOption,
    seed: Optional[int] = typer.Option(None, "--seed", help="seed of all randomness (default 0)"),
    policy: Optional[str] = typer.Option(None, "--policy", help="who decides: scripted, llm, or synthesis (a program the LLM writes; gathering, cleanup)"),
    ticks: Optional[int] = typer.Option(None, "--ticks", help="override the scenario's horizon"),
    model: Optional[str] = ModelOption,
    llm: Optional[str] = LlmOption,
    llm_arg: list[str] = LlmArgOption,
    replicas: Optional[int] = ReplicasOption,
    address: Optional[str] = AddressOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Run a scenario and store it; prints a summary (or one JSON object with --json)."""
    from analysis.reference import comparison_rows
    from analysis.summary import run_summary
    from runner.backends import preflight
    from runner.config import build_spec, llm_overrides
    from runner.execution import execute, horizon

    llm_over = llm_overrides(model, llm, llm_arg)
    if replicas is not None:
        llm_over["replicas"] = replicas
    spec = build_spec(scenario, config_file=str(config) if config else None, sets=set_, seed=seed,
                      policy=policy, ticks=ticks, llm=llm_over)
    preflight(spec)  # a model or chat class that cannot be used is bad input: refused before any write
    pool_preflight(spec, address)
    store = open_store(db)

    def info(record: Any) -> str:
        return " ".join(f"{k}={fmt(record.metrics[k])}" for k in list(record.metrics)[:2])

    result = with_progress(f"{scenario} seed {spec.seed}", as_json,
                           lambda progress: execute(spec, store, progress=progress),
                           total=horizon(spec), info=info)
    if as_json:  # (with the published values beside the run's figures, where the scenario has any)
        rows = comparison_rows(result.scenario, result.metrics)
        print(json.dumps({**result.to_json(), **({"reference": rows} if rows else {})}))
        return
    table = Table(title=f"{scenario} — run {result.run_id}: {result.status}, {result.ticks} ticks, {result.duration_s:.1f}s "
                        "(final metrics: whole run)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k, v in result.metrics.items():
        table.add_row(k, fmt(v))
    out.print(table)
    summary = run_summary(store, result.run_id)
    if summary.get("reference"):
        out.print(reference_table(summary["reference"]))
    if result.fallbacks:
        out.print(f"fallback decisions: {result.fallbacks} (see `societas show {result.run_id}`)")
    if result.reason:
        out.print(f"ended: {result.reason}", soft_wrap=True)
    usage = summary["llm"]
    if usage["calls"]:
        out.print(f"LLM: {usage['calls']} calls ({usage['cache_hits']} from the cache), tokens in/out "
                  f"{usage['tokens_in']}/{usage['tokens_out']}, {summary['fallbacks']} fallback decisions",
                  soft_wrap=True)
    out.print(f"stored in {store.url} — see: societas show {result.run_id}" + (f" --db {db}" if db else ""), soft_wrap=True)


def pool_preflight(spec: Any, address: Optional[str]) -> None:
    """`--address` without replicas, or for a run without LLM agents, is refused; a run on replicas connects to its
    cluster (`connect_pool`) before anything is stored (replicas of a model that is not local are refused: `preflight`)."""
    from runner.backends import preflight

    if spec.llm.replicas:
        preflight(spec)
    if address is not None and not spec.llm.replicas:
        fail("--address is for a run on engine replicas (--replicas N or llm.replicas)")
    if address is not None and not spec.uses_llm:  # (no replica would start: the address would go unchecked)
        fail("--address is for a run of LLM agents on engine replicas, and this run has none")
    if spec.llm.replicas and spec.uses_llm:  # a cluster that cannot be reached, or hold the replicas, stores nothing
        connect_pool(spec.llm, address)


def connect_pool(llm: Any, address: Optional[str]) -> None:
    """Connect to the Ray cluster at `address` (or start a local instance) and check it can hold the run's replicas:
    UsageError otherwise, before anything is stored (as `sweep --executor ray` does)."""
    from agents.llm.pool import placement
    from runner.sweeps.ray_tasks import connect

    connect(address, max(os.cpu_count() or 1, llm.replicas))
    placement(llm, llm.replicas)


def _report(kind: str, result: RunResult, as_json: bool, db: Optional[str]) -> None:
    if as_json:
        print(json.dumps(result.to_json()))
        return
    out.print(f"{kind} {result.run_id}: {result.status} after {result.ticks} ticks — see: societas show {result.run_id}"
              + (f" --db {db}" if db else ""), soft_wrap=True)


@app.command()
def resume(
    run_id: str,
    force: bool = typer.Option(False, "--force", help="resume a `running` run even if its owner looks alive"),
    replicas: Optional[int] = ReplicasOption,
    address: Optional[str] = AddressOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Continue an unfinished run (killed or failed) in the same run row.

    The committed ticks are replayed (scripted decisions recomputed from the seed, LLM
    decisions from the cache only) and checked against the store, then the run goes on live
    (on --replicas N engine replicas where given: a run made on replicas goes on on any number).
    """
    from runner.resume import resume_run, resume_spec

    store = open_store(db, create=False)
    pool_preflight(resume_spec(store.get_run(run_id), force=force, replicas=replicas), address)
    result = with_progress("resume", as_json, lambda progress: resume_run(store, run_id, force=force, progress=progress,
                                                                         replicas=replicas),
                           resume_hint=True)
    _report("resume", result, as_json, db)


@app.command()
def fork(
    run_id: str,
    at: int = typer.Option(..., "--at", help="last tick taken from the parent (0..its committed ticks)"),
    set_: list[str] = typer.Option([], "--set", help="config field to change after tick AT: key=value (repeatable)"),
    replicas: Optional[int] = ReplicasOption,
    address: Optional[str] = AddressOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """A new run identical to RUN_ID up to tick AT, then continuing under the changed config (on --replicas N engine
    replicas where given)."""
    from runner.resume import fork_run, fork_spec

    store = open_store(db, create=False)
    pool_preflight(fork_spec(store, store.get_run(run_id), at, set_, replicas)[0], address)
    result = with_progress("fork", as_json, lambda progress: fork_run(store, run_id, at, set_, progress=progress,
                                                                     replicas=replicas),
                           resume_hint=True)
    _report("fork", result, as_json, db)


@app.command()
def rollouts(
    run_id: str,
    at: int = typer.Option(..., "--at", help="the rollouts' branch tick: every one is RUN_ID up to it (0..its committed ticks)"),
    k: int = typer.Option(8, "-k", "--rollouts", help="how many rollouts (1..1024)"),
    set_: list[str] = typer.Option([], "--set", help="config field to change after tick AT in every rollout: key=value (repeatable)"),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """A rollout group: K forks of RUN_ID at tick AT that differ only in their decision seeds after it, then each
    rollout's return after AT and its group-relative advantage (GRPO's (R - mean) / std), per agent and per rollout.

    Made again, the same group is answered from the cache (LLM decisions) and the seeds (scripted ones).
    """
    from analysis.rollouts import advantages
    from runner.rollouts import rollout_runs

    store = open_store(db, create=False)
    results = with_progress(f"rollouts x{k}", as_json, lambda progress: rollout_runs(store, run_id, at, k, set_,
                                                                                   progress=progress))
    report = advantages(store, [r.run_id for r in results], at)
    if as_json:
        print(json.dumps(report))
        return
    table = Table(title=f"{len(results)} rollouts of {report['parent_id']} from tick {at}")
    for col in ("rollout", "run", "status", "ticks", "mean return", "advantage"):
        table.add_column(col)
    for r, g in zip(results, report["runs"]):
        table.add_row(str(g["rollout"]), r.run_id, r.status, str(r.ticks), fmt(g["return"]), fmt(g["advantage"]))
    out.print(table)
    out.print("per-agent returns and advantages: --json (`agents`), or societas.api.rollouts(...).advantages", soft_wrap=True)


@app.command()
def probe(
    scenario: str = typer.Argument(..., help="registered scenario name, or your own class (path/to/file.py:Class)"),
    name: list[str] = typer.Option([], "--probe", help="run only this probe (repeatable; default: all the scenario has)"),
    seeds: int = typer.Option(DEFAULT_SEEDS, "--seeds", help="matched seeds per level (10..10,000)"),
    paraphrases: int = typer.Option(0, "--paraphrases", help=f"also answer under K rewordings of the prompt's instructions "
                                    f"that keep its facts (0..{MAX_PARAPHRASES}); reports the effect's spread and any flip"),
    config: Optional[Path] = ConfigOption,
    set_: list[str] = SetOption,
    seed: Optional[int] = typer.Option(None, "--seed", help="the first seed (default 0)"),
    policy: Optional[str] = typer.Option("llm", "--policy",
                                         help="who decides: llm (default), scripted, or synthesis (gathering, cleanup)"),
    model: Optional[str] = ModelOption,
    llm: Optional[str] = LlmOption,
    llm_arg: list[str] = LlmArgOption,
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Does a decision respond to what the paper's finding depends on? Matched requests that differ in one variable
    (the stock, the recipient's last gift, a price, a post's distance, the apples left), answered by the study's backend;
    per probe the mean response at each level and the effect (last level minus first, paired by seed) with a 95%
    interval, checked by a control blind to the variable and one that follows it (docs/probes.md)."""
    from runner.backends import preflight
    from runner.config import build_spec, llm_overrides
    from runner.probing import plan_probes, run_probes

    spec = build_spec(scenario, config_file=str(config) if config else None, sets=set_, seed=seed,
                      policy=policy, llm=llm_overrides(model, llm, llm_arg))
    preflight(spec)
    _, probes, _ = plan_probes(spec, name, seeds, paraphrases)  # bad input: one line, before the bar and the store
    store = open_store(db)
    report: ProbeReport = with_progress(
        f"probe {scenario}", as_json,
        lambda progress: run_probes(spec, store, names=name, seeds=seeds, paraphrases=paraphrases, progress=progress),
        total=len(probes))
    if as_json:
        print(json.dumps(report.to_json()))
        return
    table = Table(title=f"{scenario} validity probes ({report.policy}, {seeds} seeds per level) — run {report.run_id}")
    columns = ["probe", "variable: levels", "mean response at each level", "effect [95% interval]", "responds?",
               "controls: blind / follows"]
    if paraphrases:
        columns.append(f"effect under {paraphrases} rewordings")
    for col in columns:
        table.add_column(col)
    for r in report.results:
        interval = f"[{fmt(r.lo)}, {fmt(r.hi)}]" if r.lo is not None else ""
        controls = " / ".join(f"{'yes' if c['responds'] else 'no'} {'ok' if c['ok'] else 'FAILED'}"
                              for c in (r.controls["blind"], r.controls["follows"]))
        row = [r.name, f"{r.variable}: {', '.join(fmt(x) for x in r.levels)}",
               f"{r.response}: {', '.join(fmt(m) for m in r.means)}", f"{fmt(r.effect)} {interval}", r.verdict(), controls]
        if paraphrases:
            spread = r.spread()
            row.append(", ".join(fmt(w["effect"]) for w in r.wordings[1:])
                       + (f" (range {fmt(spread[0])} to {fmt(spread[1])})" if spread else ""))
        table.add_row(*row)
    out.print(table)
    for r in report.results:
        notes = [f"{r.name}: {r.finding}"]
        if r.fallbacks:
            notes.append(f"{r.fallbacks} answers could not be used (the default was used; their seeds are left out)")
        if not r.valid:
            failed = [f"{role} ({c['does']}) read {'yes' if c['responds'] else 'no'}"
                      for role, c in r.controls.items() if not c["ok"]]
            notes.append("the instrument failed its controls: " + "; ".join(failed) + ", so this verdict says nothing")
        if paraphrases and r.flips:
            notes.append("the verdict flips under rewording: the finding depends on the prompt's wording")
        if paraphrases and not any(w["reworded"]["question"] or w["reworded"]["system"] for w in r.wordings[1:]):
            notes.append("nothing was reworded (this config writes its own question and system text)")
        out.print("; ".join(notes), soft_wrap=True, highlight=False)
    out.print(f"stored in {store.url} — see: societas show {report.run_id}" + (f" --db {db}" if db else ""), soft_wrap=True)
