"""The sandbox's levels as a user meets them: a synthesis run is refused where bubblewrap cannot be had (exit 2, one
line, nothing stored) unless a weaker level is named; the named level is stored, shown by `show` and the app, and
every escape attempt of the issue's kind ends as a recorded incident at every level.

bubblewrap is made unavailable by a PATH without `bwrap` (what a machine without it looks like to the code).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from agents.sandbox import levels
from agents.sandbox.process import LEVELS, probe
from analysis.summary import run_summary
from scenarios.registry import get_scenario
from sim.core.errors import UsageError
from runner.backends import make_backends
from runner.config import build_spec
from runner.execution import execute
from runner.replay import replay_run
from sim.store.store import Store

ROOT = Path(__file__).resolve().parents[1]
GRID = ("map=small", "agents=2", "episode_steps=3")


def _no_bwrap(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH holds no bwrap."""
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    return {**os.environ, "PATH": str(empty), "PYTHONPATH": str(ROOT)}


def _societas(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "societas.cli", *args], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=300)


def _program(tmp_path: Path, body: str) -> Path:
    code = tmp_path / f"policy_{uuid.uuid4().hex[:8]}.py"
    code.write_text(body)
    return code


def test_without_bubblewrap_a_synthesis_run_is_refused_before_anything_is_stored(tmp_path):
    """No bwrap: `run --policy synthesis` exits 2 with one line saying what to install and which weaker level can be
    named; no store is created. Naming a weaker level runs, stores it and `show` says what it guarantees."""
    env = _no_bwrap(tmp_path)
    db = tmp_path / "runs.db"
    code = _program(tmp_path, "def policy(obs):\n    return greedy_action(obs)\n")
    base = ["run", "gathering", "--policy", "synthesis", *[a for s in GRID for a in ("--set", s)],
            "--set", f"seed_code={code}", "--db", str(db)]
    proc = _societas(base, env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "apt-get install bubblewrap" in lines[0] and "--set sandbox=" in lines[0], lines[0]
    assert not db.exists()
    proc = _societas([*base, "--set", "sandbox=process", "--json"], env)
    assert proc.returncode == 0, proc.stderr
    shown = _societas(["show", "--db", str(db), proc.stdout.split('"run_id": "')[1][:12]], env)
    assert shown.returncode == 0 and "sandbox: process — weakest" in shown.stdout, shown.stdout


def test_a_run_records_its_level_and_replay_refuses_a_level_it_cannot_have(tmp_path, monkeypatch):
    """A run stores the level it ran under (default bubblewrap); replaying, resuming or forking it where that level is
    missing is refused (the backends are never built), not run under something weaker."""
    if probe("bubblewrap") is not None:
        pytest.skip(probe("bubblewrap"))
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    code = _program(tmp_path, "def policy(obs):\n    return greedy_action(obs)\n")
    spec = build_spec("gathering", policy="synthesis", sets=(*GRID, f"seed_code={code}"))
    run = execute(spec, store)
    assert store.get_run(run.run_id).spec["config"]["sandbox"] == "bubblewrap"
    assert run_summary(store, run.run_id)["sandbox"]["level"] == "bubblewrap"
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(UsageError, match="apt-get install bubblewrap"):
        make_backends(spec, get_scenario("gathering"), store)
    with pytest.raises(UsageError, match="bubblewrap"):
        replay_run(store, run.run_id)
    assert len(store.list_runs()) == 1  # the refused replay stored nothing


def test_bubblewrap_that_cannot_start_says_so_and_how_to_fix_it(monkeypatch):
    """bwrap installed but unusable (no user namespaces): the refusal says that, not 'install it'."""
    monkeypatch.setattr(levels, "probe", lambda name: "bubblewrap cannot start here (bwrap: setting up uid map: "
                                                      "Permission denied)" if name == "bubblewrap" else None)
    with pytest.raises(UsageError) as caught:
        levels.require(None)
    text = str(caught.value)
    assert "user namespaces" in text and "uid map" in text and "--set sandbox=landlock" in text
    assert levels.require("process") == "process"
    monkeypatch.setattr(levels, "probe", lambda name: "Landlock is not enabled in this kernel")
    with pytest.raises(UsageError, match="'landlock' cannot be had here: Landlock is not enabled"):
        levels.require("landlock")


ATTACKS = {  # the issue's, written as a policy file (a stand-in for what an LLM writes)
    "read /etc/passwd": "import typing\ndef policy(obs):\n    return len(typing.sys.modules['builtins'].open('/etc/passwd').read()) % 7\n",
    "write outside": ("import typing\ndef policy(obs):\n    typing.sys.modules['builtins'].open('{marker}', 'w').write('x')\n"
                      "    return 7\n"),
    "shell": "import typing\ndef policy(obs):\n    typing.sys.modules['os'].system('touch {marker}')\n    return 7\n",
    "setsid": ("import typing\ndef policy(obs):\n    os = typing.sys.modules['os']\n    if os.fork() == 0:\n"
               "        os.setsid()\n        if os.fork() == 0:\n            os.close(os.open('{marker}', 0o101))\n"
               "            typing.sys.modules['time'].sleep(60)\n    return 7\n"),
    "through an API function": ("def policy(obs):\n    m = greedy_action.__globals__['np'].ctypeslib.ctypes.sys.modules\n"
                                "    m['os'].system('touch {marker}')\n    return 7\n"),
}


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("attack", list(ATTACKS))
def test_every_escape_attempt_is_a_recorded_incident_at_every_level(level, attack, tmp_path):
    """Each attack of the issue, at each level: the run records a violation (incidents > 0, violations 1), writes
    nothing outside and leaves no process; the program is not accepted into doing anything."""
    if probe(level) is not None:
        pytest.skip(probe(level))
    token = uuid.uuid4().hex
    marker = tmp_path / token
    code = _program(tmp_path, ATTACKS[attack].format(marker=marker))
    store = Store(f"sqlite:///{tmp_path / 'runs.db'}")
    spec = build_spec("gathering", policy="synthesis", sets=(*GRID, f"seed_code={code}", f"sandbox={level}"))
    metrics = execute(spec, store).metrics
    if attack == "through an API function":  # the checks refuse its dunder: it never runs, and says so
        assert metrics["code_accepted"] == 0 and metrics["incidents"] > 0
    else:
        assert metrics["code_accepted"] == 1 and metrics["violations"] == 1 and metrics["incidents"] > 0, metrics
    assert not marker.exists()
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _holds(p, token)]


def _holds(pid: str, token: str) -> bool:
    try:
        return token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def test_the_app_shows_the_level_a_run_ran_under(tmp_path, monkeypatch):
    """The Run and Policies pages say which sandbox level ran the run's code; a weaker one is a warning."""
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    code = _program(tmp_path, "def policy(obs):\n    return greedy_action(obs)\n")
    run = execute(build_spec("gathering", policy="synthesis", sets=(*GRID, f"seed_code={code}", "sandbox=process")),
                  Store(url))
    monkeypatch.setenv("SOCIETAS_DB", url)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    for page in ("policies", "run"):
        at.query_params["run"] = run.run_id
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception
        assert any("Sandbox: process — weakest" in w.value for w in at.warning), (page, [w.value for w in at.warning])


def test_bootstrap_says_how_to_get_the_full_sandbox(tmp_path):
    """`python -m agents.sandbox` (run by `make bootstrap`) is silent where bubblewrap works, and otherwise prints one
    line with the install command; it never fails."""
    env = _no_bwrap(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "agents.sandbox"], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=120)
    assert proc.returncode == 0 and len(proc.stdout.strip().splitlines()) == 1
    assert "apt-get install bubblewrap" in proc.stdout
    assert "$(PY) -m agents.sandbox || true" in (ROOT / "Makefile").read_text()
    if probe("bubblewrap") is None:
        proc = subprocess.run([sys.executable, "-m", "agents.sandbox"], capture_output=True, text=True, cwd=ROOT,
                              timeout=120)
        assert proc.returncode == 0 and proc.stdout == ""
