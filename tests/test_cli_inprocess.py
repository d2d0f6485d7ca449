"""The CLI run in the test process (`cli`, tests/inprocess.py) answers as a new process does (`cli_process`): the same
exit code, stdout and stderr for a sample of commands, and nothing of it is left in the test process after."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from scenarios import REGISTRY
from tests.conftest import CLI_IN_PROCESS, cli, cli_process

pytestmark = pytest.mark.skipif(not CLI_IN_PROCESS, reason="SOCIETAS_TEST_CLI=process: `cli` is a new process, nothing "
                                "runs in this one to compare")


def both(*args: str, db: str | None = None, columns: int = 200) -> tuple[subprocess.CompletedProcess, ...]:
    """`societas ARGS` in this process and in a new one."""
    return cli(*args, db=db, columns=columns), cli_process(*args, db=db, columns=columns)


def same(a: subprocess.CompletedProcess, b: subprocess.CompletedProcess, a_is: dict[str, str] | None = None,
         b_is: dict[str, str] | None = None) -> None:
    """Equal exit codes and outputs, once each output's own names (a run id, a folder) are read as the same."""
    def norm(text: str, names: dict[str, str] | None) -> str:
        for name, common in (names or {}).items():
            text = text.replace(name, common)
        return text

    assert (a.returncode, norm(a.stdout, a_is), norm(a.stderr, a_is)) == \
        (b.returncode, norm(b.stdout, b_is), norm(b.stderr, b_is))


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[str, str]:
    """A store with one short scripted run (made by a process): (url, run id)."""
    url = f"sqlite:///{tmp_path_factory.mktemp('inprocess') / 'runs.db'}"
    made = cli_process("run", "commons", "--ticks", "3", "--set", "fishers=4", "--json", db=url)
    assert made.returncode == 0, made.stderr
    return url, json.loads(made.stdout)["run_id"]


@pytest.mark.parametrize("args,columns", [
    (("--version",), 200),
    (("--help",), 80),
    (("run", "--help"), 100),
    (("scenarios", "commons"), 120),
    ((), 200),  # no command: the help, exit 2
    (("nosuch",), 200),  # the parser's one line
    (("run", "commons", "--set", "fishers=-1"), 200),  # bad input: one line, exit 2
    (("show", "000000000000"), 200),  # no store there: one line, exit 2
])
def test_commands_answer_alike_in_this_process_and_in_a_new_one(tmp_path, args, columns):
    """Help, version, listings and every kind of refusal: the same bytes and exit code both ways."""
    missing = f"sqlite:///{tmp_path / 'none.db'}" if args[:1] in (("run",), ("show",)) else None
    a, b = both(*args, db=missing if len(args) > 1 else None, columns=columns)
    same(a, b)
    assert not (tmp_path / "none.db").exists()


@pytest.mark.parametrize("args", [("list",), ("show", "{run}"), ("show", "{run}", "--json"), ("replay", "{run}", "--json"),
                                  ("list", "--json")])
def test_reading_commands_answer_alike(stored, args):
    """Tables and JSON of a stored run: the same both ways (at 80 columns, so tables fold alike)."""
    url, run_id = stored
    same(*both(*[a.format(run=run_id) for a in args], db=url, columns=80))


def test_a_run_and_its_export_answer_alike(tmp_path):
    """A run (its JSON summary) and its export print the same and write the same rows both ways (but for the times
    and the process id a run's row and its ticks' rows hold)."""
    outs = []
    for way, call in (("here", cli), ("process", cli_process)):
        db = f"sqlite:///{tmp_path / way}.db"
        ran = call("run", "donor", "--set", "generations=2", "--seed", "4", "--json", db=db)
        run_id = json.loads(ran.stdout)["run_id"]
        exported = call("export", run_id, "--format", "csv", "--out", str(tmp_path / way), db=db)
        files = {p.name: p.read_text().replace(run_id, "RUN").splitlines() for p in sorted((tmp_path / way).iterdir())}
        outs.append((ran, exported, files, {run_id: "RUN", str(tmp_path / way): "DIR"}))
        assert not Path(f"{tmp_path / way}.db-wal").exists()  # the store was closed at the end, as a process closes it
    (ran_a, exp_a, files_a, a_is), (ran_b, exp_b, files_b, b_is) = outs
    same(ran_a, ran_b, a_is, b_is)
    same(exp_a, exp_b, a_is, b_is)
    assert sorted(files_a) == sorted(files_b) == ["agent_steps.csv", "events.csv", "llm_calls.csv", "llm_usage.csv", "runs.csv",
                                                  "ticks.csv"]
    for name in ("agent_steps.csv", "events.csv", "llm_calls.csv"):
        assert files_a[name] == files_b[name]
    for name in ("runs.csv", "ticks.csv"):
        assert [len(f[name]) for f in (files_a, files_b)] == [len(files_a[name])] * 2 and files_a[name][0] == files_b[name][0]


def test_a_library_warning_is_hidden_and_shown_with_v_alike(tmp_path):
    """A warning raised by a scenario file (not societas' own code) is hidden, and shown with -v, the same both ways."""
    path = tmp_path / "warns.py"
    path.write_text("import warnings\nfrom scenarios.commons.model import CommonsModel\n"
                    "warnings.warn('a library speaks', UserWarning)\n\nclass Loud(CommonsModel):\n    name = 'loud'\n")
    for flags in ((), ("-v",)):
        a, b = both(*flags, "scenarios", f"{path}:Loud", "--json")
        same(a, b)
        assert ("a library speaks" in a.stderr) == bool(flags)


def test_nothing_of_a_command_stays_in_the_test_process(tmp_path):
    """cwd, environment, argv, sys.path, warning filters, logging, signal handlers and the scenario registry are as
    before; a scenario file rewritten between two commands is imported anew."""
    before = (os.getcwd(), dict(os.environ), list(sys.argv), list(sys.path), list(warnings.filters),
              logging.getLogger().handlers[:], signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM),
              sorted(dict.keys(REGISTRY)))
    loaded = {m for m in sys.modules if m.startswith("societas_user_mine")}  # (other tests' files, imported here)
    path = tmp_path / "mine.py"
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    for agents in (3, 5):
        path.write_text("from scenarios.commons.model import CommonsModel, CommonsConfig\n\n"
                        f"class Mine(CommonsModel):\n    class Config(CommonsConfig):\n        fishers: int = {agents}\n")
        shown = cli("scenarios", f"{path}:Mine", "--json")
        assert shown.returncode == 0, shown.stderr
        (fishers,) = [f for f in json.loads(shown.stdout)[0]["fields"] if f["name"] == "fishers"]
        assert fishers["default"] == agents
        assert cli("run", f"{path}:Mine", "--ticks", "1", db=db).returncode == 0
    after = (os.getcwd(), dict(os.environ), list(sys.argv), list(sys.path), list(warnings.filters),
             logging.getLogger().handlers[:], signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM),
             sorted(dict.keys(REGISTRY)))
    assert after == before
    assert not [m for m in sys.modules if m.startswith("societas_user_mine") and m not in loaded]


def test_a_command_that_replaces_its_process_is_refused_here(tmp_path):
    """`societas app` execs Streamlit: in this process it fails loudly (exit 1, a traceback) instead of replacing pytest."""
    got = cli("app", "--port", "1", db=f"sqlite:///{tmp_path / 'runs.db'}")
    assert got.returncode == 1 and "cli_process" in got.stderr
