"""`societas`, the command line: one typer app (`app`), its commands in modules by what they do.

    running   run, resume, fork, rollouts, probe   reading   list, show, compare-runs, export, replay, scenarios
    sweeping  sweep, sweep-status                  checking  check (the conformance kit)
    asking    interview, survey                    admin     db upgrade
"""

from societas.cli import admin, asking, checking, reading, running, sweeping  # noqa: F401 - each module registers its commands
from societas.cli.app import app, fit_widths, main

#: the order `societas --help` lists the commands in (the store's `db` group comes last)
ORDER = ("run", "list", "show", "compare-runs", "export", "replay", "scenarios", "check", "resume", "fork", "rollouts", "probe", "interview",
         "survey", "sweep", "sweep-status", "app")
app.registered_commands.sort(key=lambda c: ORDER.index(c.name or c.callback.__name__))

__all__ = ["app", "main", "fit_widths"]
