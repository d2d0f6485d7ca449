"""`societas`, the command line: one typer app (`app`), its commands in modules by what they do.

    running   run, resume, fork          reading   list, show, export, replay, scenarios
    sweeping  sweep, sweep-status        admin     db upgrade
"""

# each module registers its commands, in the order `societas --help` lists them
from sim.cli import running  # noqa: F401,I001
from sim.cli import reading  # noqa: F401
from sim.cli import sweeping  # noqa: F401
from sim.cli import admin  # noqa: F401
from sim.cli.app import app, fit_widths, main

__all__ = ["app", "main", "fit_widths"]
