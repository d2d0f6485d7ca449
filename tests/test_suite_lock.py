"""The suite's readers-writer lock (tests/conftest.py): under pytest-xdist a test marked `alone` runs while no other
test runs, and no test starts while one marked `alone` waits for its turn."""

from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pytest

from tests import conftest as suite

WAIT = 0.5  # seconds a blocked turn is given to (wrongly) start


@pytest.fixture
def folder(monkeypatch, tmp_path) -> Path:
    """A run of its own: its id, and a folder for its lock files."""
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", f"locktest{uuid.uuid4().hex}")
    return tmp_path


def _enter(alone: bool, folder: Path, started: threading.Event, release: threading.Event) -> threading.Thread:
    """A thread that takes a turn (as a test of that kind would), says so, and holds it until `release`."""
    def hold() -> None:
        with suite._turn(alone=alone, folder=folder):
            started.set()
            release.wait(30)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def test_an_alone_test_waits_for_the_running_ones_and_holds_back_new_ones(monkeypatch, folder):
    """Two tests run side by side; an `alone` one waits for both, and a test arriving meanwhile waits for it."""
    monkeypatch.setattr(suite, "WORKER", "gw0")
    monkeypatch.setattr(suite, "WORKERS", 2)
    (a, b, c, d), (free_a, free_b, free_c, free_d) = ([threading.Event() for _ in range(4)] for _ in range(2))
    threads = [_enter(False, folder, a, free_a), _enter(False, folder, b, free_b)]
    assert a.wait(10) and b.wait(10)  # side by side
    threads.append(_enter(True, folder, c, free_c))
    assert not c.wait(WAIT)  # the alone test waits for the running ones...
    threads.append(_enter(False, folder, d, free_d))
    assert not d.wait(WAIT)  # ...and a new test waits behind it
    free_a.set()
    assert not c.wait(WAIT)
    free_b.set()
    assert c.wait(10) and not d.wait(WAIT)  # alone: nothing else runs
    free_c.set()
    assert d.wait(10)
    free_d.set()
    for thread in threads:
        thread.join(10)
        assert not thread.is_alive()


def test_without_workers_no_turn_is_waited_for(monkeypatch, folder):
    """Outside xdist (or with one worker) an `alone` test and another run at once: there is nothing to share."""
    monkeypatch.setattr(suite, "WORKER", None)
    (a, b), (free_a, free_b) = ([threading.Event() for _ in range(2)] for _ in range(2))
    threads = [_enter(False, folder, a, free_a), _enter(True, folder, b, free_b)]
    assert a.wait(10) and b.wait(10)
    free_a.set()
    free_b.set()
    for thread in threads:
        thread.join(10)
