"""Output into a pipe its reader closed (`societas --help | head -1`) ends quietly with exit 0, for every command and
every help screen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from societas.cli import app
from sim.store.store import Store

ROOT = Path(__file__).resolve().parents[1]


def every_help() -> list[list[str]]:
    """`--help` of the root, of every command and of every group's commands, and the bare root (help, exit 2)."""
    out = [[], ["--help"]]
    out += [[c.name or c.callback.__name__.replace("_", "-"), "--help"] for c in app.registered_commands]
    for group in app.registered_groups:
        out.append([group.name, "--help"])
        out += [[group.name, c.name or c.callback.__name__, "--help"] for c in group.typer_instance.registered_commands]
    return out


def closed_pipe(args: list[str]) -> subprocess.CompletedProcess:
    """Run `societas ARGS` with stdout a pipe whose reading end is closed before anything is written."""
    read, write = os.pipe()
    os.close(read)
    try:
        proc = subprocess.run([sys.executable, "-m", "societas.cli", *args], stdout=write, stderr=subprocess.PIPE, text=True,
                              cwd=ROOT, timeout=120, env={**os.environ, "COLUMNS": "100"})
    finally:
        os.close(write)
    return proc


@pytest.mark.parametrize("args", every_help(), ids=lambda a: " ".join(a) or "(none)")
def test_help_into_a_closed_pipe_exits_0_quietly(args):
    """Every help screen (and the bare command, which shows the help) into a closed pipe: exit 0, nothing on stderr."""
    proc = closed_pipe(args)
    assert proc.returncode == 0 and proc.stderr == "", (args, proc.returncode, proc.stderr[-300:])


@pytest.mark.parametrize("args", [["scenarios"], ["scenarios", "--json"], ["--version"], ["list"], ["list", "--json"]])
def test_output_into_a_closed_pipe_exits_0_quietly(args, db_url):
    """A command's own output (a table, JSON, the version) into a closed pipe: exit 0, nothing on stderr."""
    if args[0] == "list":
        Store(db_url).close()  # a store (empty) to list
        args = [*args, "--db", db_url]
    proc = closed_pipe(args)
    assert proc.returncode == 0 and proc.stderr == "", (args, proc.returncode, proc.stderr[-300:])
