"""`societas sweep` and `sweep-status`: run a sweep file into one store, and follow it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from runner.limits import EXECUTORS, MAX_RUNS, MAX_RUNS_CONFIRMED
from societas.cli.app import DbOption, JsonOption, app, err, fail, open_store, out, progress_bar

if TYPE_CHECKING:  # pragma: no cover - for type checkers
    from runner.sweeps.worker import Outcome


@app.command()
def sweep(
    sweep_file: Path = typer.Argument(..., help="sweep YAML: scenario, base, grid, seeds, policy"),
    executor: str = typer.Option("local", "--executor", help="local (process pool) or ray"),
    address: Optional[str] = typer.Option(None, "--address", help="Ray cluster address (default: a local Ray instance)"),
    workers: Optional[int] = typer.Option(None, "--workers", help="runs at once (default: CPU count)"),
    yes: bool = typer.Option(False, "--yes", help=f"allow a sweep of more than {MAX_RUNS:,} runs (up to {MAX_RUNS_CONFIRMED:,})"),
    db: Optional[str] = DbOption,
    as_json: bool = JsonOption,
) -> None:
    """Run every (grid cell x seed) once into one store; re-running the same file resumes the sweep."""
    from runner.sweeps.backlog import prepare
    from runner.sweeps.executor import run_sweep
    from runner.sweeps.ray_tasks import connect
    from runner.sweeps.spec import load_sweep, preflight_llm, uses_replicas

    if executor not in EXECUTORS:
        fail(f"bad value for '--executor': {executor!r}; valid: {', '.join(EXECUTORS)}")
    if workers is not None and workers < 1:
        fail(f"bad value for '--workers': {workers}; must be at least 1")
    if address and executor != "ray":
        fail("--address is for --executor ray")
    definition = load_sweep(sweep_file, max_runs=MAX_RUNS_CONFIRMED if yes else MAX_RUNS)
    if executor == "local" and uses_replicas(definition, str(sweep_file)):  # each worker would start a Ray pool
        fail(f"{sweep_file}: llm.replicas is for one run (societas run); a sweep spreads its runs instead, and with "
             "--executor ray its runs share one model per node")
    if address is None:  # runs on this machine: an unusable model or device is bad input, found before any write
        preflight_llm(definition, str(sweep_file))
    if executor == "ray":  # a cluster that cannot be reached (or used from here) is refused before anything is written
        connect(address, workers)
    store = open_store(db)
    backlog = prepare(store, definition, source=str(sweep_file))
    bar, task = progress_bar(f"sweep {backlog.sweep_id}", backlog.total, as_json)
    with bar:
        bar.update(task, completed=backlog.done_before, info=f"{backlog.done_before} done before")

        def progress(done: int, outcome: Outcome) -> None:
            bar.update(task, completed=done, info=f"last: {outcome.status}")

        try:
            report = run_sweep(store, backlog, executor=executor, address=address, workers=workers, progress=progress)
        except KeyboardInterrupt:
            fail(f"sweep {backlog.sweep_id} interrupted; run `societas sweep {sweep_file}` again to resume it", code=130)
    if as_json:
        print(json.dumps(report))
    else:
        out.print(f"sweep {report['sweep_id']}: {report['ran']} runs now, {report['skipped']} done before; "
                  f"statuses {report['statuses']}; {report['runs_per_s']:.2f} runs/s — see: societas show --sweep "
                  f"{report['sweep_id']}" + (f" --db {db}" if db else ""), soft_wrap=True, highlight=False)
        _print_failures(report["errors"], report["failed"])
        taken = report["taken"]
        if taken:
            out.print(f"{taken} runs were taken by another process running this sweep at the same time (left to it)",
                      soft_wrap=True, highlight=False)
    if report["failed"]:
        raise typer.Exit(1)


@app.command("sweep-status")
def sweep_status(sweep_id: str, db: Optional[str] = DbOption, as_json: bool = JsonOption) -> None:
    """A sweep's progress: runs by status out of its total."""
    from runner.sweeps.status import status

    report = status(open_store(db, create=False), sweep_id)
    if as_json:
        print(json.dumps(report))
        return
    done = report["statuses"].get("finished", 0) + report["statuses"].get("collapsed", 0)
    out.print(f"sweep {report['sweep_id']} ({report['scenario']}, {report['source']}): {done}/{report['total']} done; "
              + ", ".join(f"{k} {v}" for k, v in sorted(report["statuses"].items())) + f"; {report['pending']} not started",
              soft_wrap=True, highlight=False)
    _print_failures(report["failures"], report["statuses"].get("failed", 0))


def _print_failures(failures: list[dict], count: int) -> None:
    """The runs that failed, with their reasons (the first few), on stderr."""
    for f in failures[:5]:
        err.print(f"  {f['run_id']} {f['status']}: {f['reason']}", soft_wrap=True, highlight=False, markup=False)
    if count > 5:
        err.print(f"  ... and {count - 5} more (--json lists them)", highlight=False)
