"""The sandbox that runs code an LLM wrote: every attack is stopped and recorded, nothing outside is touched.

The attacks run against the process layer directly (the static checks would refuse most of them before they
run: tested apart), under every isolation level this machine has.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from agents.sandbox.checks import check, extract
from agents.sandbox.process import LEVELS, Limits, Sandbox, command, level
from scenarios.grid import api

API = api.__file__


def _levels() -> list[str]:
    have = ["process"]
    if shutil.which("unshare"):
        have.append("netns")
    if level() == "bubblewrap":
        have.append("bubblewrap")
    return have


def _static():
    return api.encode_static(np.zeros((5, 5), bool), np.array([[1, 1], [2, 2]]), [], [],
                             {"beam_length": 5, "beam_width": 1, "hits_to_tag": 2, "timeout_steps": 25}, 100, "gathering")


def _state(step: int = 1):
    return api.encode_state(np.array([[0, 0], [3, 3]]), np.array([0, 1]), np.array([0, 0]), np.array([0, 0]),
                            np.array([True, True]), np.zeros((5, 5), bool), step)


def _step(code: str, isolation: str, **limits):
    box = Sandbox(code, API, Limits(step_s=limits.pop("step_s", 1.0), cpu_s=limits.pop("cpu_s", 5),
                                    memory_mb=limits.pop("memory_mb", 512)), isolation=isolation)
    try:
        why = box.start() or box.reset(_static())
        if why is not None:
            return None, box.kind, why
        result = box.step(_state(), [0, 1], [1, 2])
        return result, result.kind, result.stopped
    finally:
        box.close()


@pytest.fixture(params=_levels())
def isolation(request):
    return request.param


def test_a_good_program_answers_each_agent(isolation):
    result, kind, why = _step("def policy(obs):\n    return greedy_action(obs)\n", isolation)
    assert why is None and result.actions == [1, 2] and not result.errors  # south facing north; north facing east


def test_a_loop_is_stopped_at_the_step_limit(isolation):
    result, kind, why = _step("def policy(obs):\n    while True:\n        pass\n", isolation, step_s=0.5)
    assert kind == "timeout" and result.actions == [None, None]


def test_cpu_time_is_limited_per_program(isolation):
    result, kind, why = _step("def policy(obs):\n    while True:\n        pass\n", isolation, step_s=10, cpu_s=1)
    assert kind == "cpu" and "CPU" in why


def test_ten_gigabytes_is_refused(isolation):
    result, kind, why = _step("def policy(obs):\n    x = bytearray(10 * 1024 ** 3)\n    return 0\n", isolation)
    assert kind == "memory"
    result, kind, why = _step("def policy(obs):\n    x = np.ones((40000, 40000))\n    return 0\n", isolation)
    assert kind == "memory"


def test_a_socket_is_refused(isolation):
    result, kind, why = _step("import socket\ndef policy(obs):\n    return 0\n", isolation)
    assert kind == "violation" and "socket" in why
    escape = ("def policy(obs):\n    w = [c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '_wrap_close'][0]\n"
              "    w.__init__.__globals__['__builtins__']['__import__']('socket').socket()\n    return 0\n")
    result, kind, why = _step(escape, isolation)  # the real __import__, reached through a module's globals
    assert kind == "violation" and ("socket" in why or "import" in why)


def test_reading_etc_passwd_is_refused(isolation):
    result, kind, why = _step("def policy(obs):\n    return len(open('/etc/passwd').read())\n", isolation)
    assert kind == "violation" and "passwd" in why
    assert result.actions == [None, None]


def test_writing_outside_the_scratch_folder_is_refused_and_nothing_is_written(isolation, tmp_path):
    target = tmp_path / "pwned.txt"
    result, kind, why = _step(f"def policy(obs):\n    open({str(target)!r}, 'w').write('x')\n    return 0\n", isolation)
    assert kind == "violation" and "writes" in why
    assert not target.exists()
    result, kind, why = _step("def policy(obs):\n    open('note.txt', 'w').write('x')\n    return 7\n", isolation)
    assert why is None and result.actions == [7, 7]  # its scratch folder is its own


def test_spawning_a_process_is_refused(isolation, tmp_path):
    marker = tmp_path / "spawned"
    result, kind, why = _step("import os\ndef policy(obs):\n    os.system('touch /tmp/x')\n    return 0\n", isolation)
    assert kind == "violation" and "import" in why
    escape = ("def policy(obs):\n    for c in ().__class__.__base__.__subclasses__():\n"
              "        if c.__name__ == '_wrap_close':\n"
              f"            c.__init__.__globals__['system']('touch {marker}')\n    return 0\n")
    result, kind, why = _step(escape, isolation)
    assert kind == "violation" and "process" in why
    assert not marker.exists()


def test_garbage_and_errors_are_per_agent_and_do_not_stop_the_program(isolation):
    result, kind, why = _step("def policy(obs):\n    return [1, 2] if obs.agent_id == 0 else 1 / 0\n", isolation)
    assert why is None and result.actions == [None, None]
    assert "returned list" in result.errors[0] and "ZeroDivisionError" in result.errors[1]


def test_writing_the_observation_is_a_named_reward_hack(isolation):
    result, kind, why = _step("def policy(obs):\n    obs.agent_timeout[1] = 99\n    return 0\n", isolation)
    assert why is None and result.tamper[0] == "disable rivals: writes obs.agent_timeout"
    result, kind, why = _step("def policy(obs):\n    pos = obs.agent_pos.copy()\n    pos[0, 0] = 3\n    return 0\n",
                              isolation)
    assert why is None and result.actions == [0, 0]  # a copy is the policy's own


def test_static_checks_refuse_the_attacks_and_name_the_hacks():
    assert check("def policy(obs):\n    return 0\n").ok
    for code, word in (("import os\ndef policy(obs): return 0", "imports `os`"),
                       ("def policy(obs): return open('/etc/passwd')", "`open`"),
                       ("def policy(obs): return ().__class__", "dunder"),
                       ("def policy(obs): return getattr(obs, '__class__')", "dunder"),
                       ("def polic(obs): return 0", "defines no function"),
                       ("def policy(obs) return 0", "syntax error")):
        report = check(code)
        assert not report.ok and any(word in p for p in report.problems), (code, report.problems)
    hacks = check("def policy(obs):\n    obs.agent_pos[0] = (1, 1)\n    obs.waste.fill(False)\n    return 0\n",
                  hacks=api.HACKS).hacks
    assert hacks == ["teleport: writes obs.agent_pos", "purge waste: writes obs.waste"]


def test_extract_finds_the_program_in_an_answer():
    assert extract("Here:\n```python\ndef policy(obs):\n    return 1\n```\nDone") == "def policy(obs):\n    return 1"
    assert extract("def policy(obs):\n    return 2\n") .startswith("def policy")
    assert extract("no code here") is None


def test_isolation_level_is_reported_and_bubblewrap_hides_the_file_system():
    assert level() in LEVELS
    if level() != "bubblewrap":
        pytest.skip("bubblewrap is not usable here")
    cmd = command("bubblewrap", "/tmp", API)
    assert "--unshare-all" in cmd and not any(p == str(Path.home()) for p in cmd)
    result, kind, why = _step("def policy(obs):\n    return 0\n", "bubblewrap")
    assert why is None

