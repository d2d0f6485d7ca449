"""`societas check`: the conformance kit (societas.testing) as a command, reporting every rule a scenario breaks."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import typer
from rich.table import Table

from societas.cli.app import JsonOption, app, fail, out

if TYPE_CHECKING:  # pragma: no cover - for type checkers
    from societas.testing import ConformanceReport


@app.command()
def check(
    scenario: str = typer.Argument(..., help="a registered scenario name, or your own class: path/to/file.py:Class or "
                                   "package.module:Class (try scenarios.examples.coins:Coins and "
                                   "scenarios.examples.broken:BrokenCoins)"),
    set_: list[str] = typer.Option([], "--set", help="a config field for every run of the check: key=value (repeatable)"),
    ticks: int = typer.Option(3, "--ticks", min=1, max=1000, help="ticks of each run the check makes"),
    seed: int = typer.Option(7, "--seed", min=0, help="seed of the runs the check makes"),
    probes: bool = typer.Option(False, "--probes", help="also check the scenario's validity probes as instruments "
                                "(their blind and following controls; ten seeds each)"),
    as_json: bool = JsonOption,
) -> None:
    """Check a scenario against the platform's contract: every rule it breaks, with what broke it.

    The rules: declared, stored, reproducible, seeded, resumable, batched and checked, replayable (and with
    --probes its validity probes). Its runs, scripted and with a fake LLM, go to a temporary store. Exit 0 when
    every rule holds, 1 when one fails.
    """
    from runner.execution import RunInterrupted
    from societas.testing import RULES, run_checks

    try:
        report = run_checks(scenario, ticks=ticks, seed=seed, sets=set_, probes=probes)
    except RunInterrupted as exc:
        fail(f"check {exc.reason}: nothing was kept (its runs were in a temporary store)", code=exc.exit_code)
    if as_json:
        print(json.dumps(report.to_json()))
    else:
        rules = [*RULES, *(["probes"] if probes else [])]
        table = Table(title=f"{report.scenario}: {len(report.passed)} of {len(rules) - len(report.skipped)} rules hold")
        table.add_column("rule")
        table.add_column("")
        table.add_column("what was found", overflow="fold")
        for rule in rules:
            table.add_row(rule, *_verdict(report, rule))
        out.print(table)
    if not report.ok:
        raise typer.Exit(1)


def _verdict(report: ConformanceReport, rule: str) -> tuple[str, str]:
    """(mark, what) of `rule` in `report`."""
    if rule in report.failed:
        return "[bold red]fails[/]", "\n".join(report.failed[rule])
    if rule in report.not_checked:
        return "[yellow]not checked[/]", report.not_checked[rule]
    if rule in report.skipped:
        return "[dim]skipped[/]", report.skipped[rule]
    return "[green]holds[/]", ""

