"""Shared fixtures: a throwaway SQLite store per test, and helpers to run the CLI for real."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sim.store import Store

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
def store(db_url: str) -> Store:
    return Store(db_url)


def cli(*args: str, db: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `societas ARGS` in a subprocess, exactly as a user would."""
    cmd = [sys.executable, "-m", "sim.cli", *args]
    if db:
        cmd += ["--db", db]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=env)


def cli_json(*args: str, db: str | None = None):
    proc = cli(*args, "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)
