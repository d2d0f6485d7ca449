"""Shared fixtures: a throwaway SQLite store per test, and helpers to run the CLI (in this process or in a new one)."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from sim.store.store import Store
from tests import inprocess

ROOT = Path(__file__).resolve().parents[1]
#: under pytest-xdist (`make test` runs `-n 2`): this worker's name and how many share the machine
WORKER, WORKERS = os.environ.get("PYTEST_XDIST_WORKER"), int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if WORKER:  # torch's threads (read when it is imported, here and in the processes tests start): the cores shared out
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // WORKERS)))


def pytest_configure(config: pytest.Config) -> None:
    """Deliver SIGINT and SIGHUP to this process and the CLI processes it starts, however the suite was started.

    A shell without job control starts a background job (`make test &`) with SIGINT ignored, `nohup`
    starts it with SIGHUP ignored, and a child inherits both; the CLI rightly keeps an ignored signal
    ignored, so the signal tests would hang or see nothing. They test the CLI's handling, not the
    caller's choice, so restore them.
    """
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test marked `alone` runs while no other test runs (its setup, call and teardown); the others run side by side."""
    shared = item.config._tmp_path_factory.getbasetemp().parent if WORKER else None  # the run's, rotated by pytest
    with _turn(alone=item.get_closest_marker("alone") is not None, folder=shared):
        return (yield)


@contextmanager
def _turn(alone: bool, folder: Path | None) -> Iterator[None]:
    """Under xdist, a readers-writer lock shared by this run's workers (flock on two files in `folder`, the parent of
    their temporary folders): every test holds it shared, an `alone` test exclusively; a waiting `alone` test holds the
    gate, so no new test starts meanwhile. Without xdist, nothing to share."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not WORKER or WORKERS < 2 or not run or folder is None:
        yield
        return
    with open(folder / f"societas-tests-{run}.gate", "a") as gate, open(folder / f"societas-tests-{run}.lock", "a") as lock:
        fcntl.flock(gate, fcntl.LOCK_EX)
        if not alone:
            fcntl.flock(gate, fcntl.LOCK_UN)
        fcntl.flock(lock, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
            fcntl.flock(gate, fcntl.LOCK_UN)


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'runs.db'}"


@pytest.fixture
def store(db_url: str) -> Iterator[Store]:
    """A fresh SQLite store, its connections closed after the test (a suite of ~1,500 tests otherwise holds
    hundreds of open database files until the garbage collector finds them)."""
    opened = Store(db_url)
    yield opened
    opened.close()


def scripted_model(scenario: str, *, config_file: str | None = None, sets: tuple[str, ...] | list[str] = (),
                   policy: str = "llm"):
    """The scenario's model built from a config file and --set pairs as a run builds it (seed 0), every agent's
    requests, LLM ones too, answered by the scenario's scripted strategies: for tests of what the world asks and
    shows its agents, not of what a model answers."""
    from agents.scripted import ScriptedBackend
    from scenarios import get_scenario
    from runner.config import build_spec
    from sim.tick.broker import DecisionBroker

    spec = build_spec(scenario, config_file=config_file, sets=list(sets))
    cls = get_scenario(scenario)
    scripted = ScriptedBackend(cls.strategies)
    return cls(cls.Config.model_validate(spec.config), seed=0, policy=policy,
               broker=DecisionBroker({"llm": scripted, "scripted": scripted}))


#: $SOCIETAS_TEST_CLI=process runs every `cli()` in a new process, as `cli_process` does (to compare the two ways)
CLI_IN_PROCESS = os.environ.get("SOCIETAS_TEST_CLI", "inprocess") != "process"


def cli(*args: str, db: str | None = None, timeout: float = 300, columns: int = 200) -> subprocess.CompletedProcess:
    """Run `societas ARGS` as a user would (on a terminal `columns` wide): its exit code, stdout and stderr.

    It runs in this process (tests/inprocess.py: the same output, exit code and effects as a new process, in
    milliseconds instead of seconds); a test of the process itself (signals, pipes, imports, kill -9, concurrent
    commands) calls `cli_process`."""
    if not CLI_IN_PROCESS:
        return cli_process(*args, db=db, timeout=timeout, columns=columns)
    return inprocess.run([*args, *(["--db", db] if db else [])], env={"COLUMNS": str(columns)}, cwd=ROOT, timeout=timeout)


def cli_process(*args: str, db: str | None = None, timeout: float = 300, columns: int = 200) -> subprocess.CompletedProcess:
    """Run `societas ARGS` in a new process, exactly as a user would (on a terminal `columns` wide)."""
    cmd = [sys.executable, "-m", "societas.cli", *args]
    if db:
        cmd += ["--db", db]
    env = {**os.environ, "COLUMNS": str(columns)}
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout, env=env)


def cli_json(*args: str, db: str | None = None):
    """`cli(ARGS --json)`: it must succeed; its parsed JSON."""
    proc = cli(*args, "--json", db=db)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance (2 CPUs) for the test module that asks for it (the sweeps' and the pool's tests)."""
    ray = pytest.importorskip("ray")
    from agents.llm.shared import init_ray

    init_ray(None, 2)
    yield ray
    ray.shutdown()


PG_SKIP = "SOCIETAS_TEST_PG is not set (PostgreSQL tests need a server: eval \"$(.ci/postgres.sh)\"; CI sets it)"


@pytest.fixture
def pg_url_factory():
    """Make fresh, empty PostgreSQL databases on the server of $SOCIETAS_TEST_PG; dropped afterwards.

    Requested by tests that run on PostgreSQL; calling it skips the test when no server is configured.
    """
    import uuid

    from sqlalchemy import create_engine, make_url, text

    base = os.environ.get("SOCIETAS_TEST_PG")
    made: list[str] = []

    def make() -> str:
        if not base:
            pytest.skip(PG_SKIP)
        name = f"societas_t_{uuid.uuid4().hex[:10]}"
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        made.append(name)
        return make_url(base).set(database=name).render_as_string(hide_password=False)

    yield make
    if made:
        import gc

        gc.collect()  # engines of the test's stores: close their pooled connections before dropping
        admin = create_engine(base, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            for name in made:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
