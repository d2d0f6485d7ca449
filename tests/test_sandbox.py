"""The sandbox that runs code an LLM wrote: every attack is stopped and recorded, nothing outside is touched.

The attacks run against the process layer directly (the static checks would refuse most of them before they
run: tested apart), under every isolation level (bubblewrap, landlock, process), twice where it matters: with
the worker's Python guard (each attempt is a recorded violation), and without it (`guard=False`: a program
that got past the guard), where each level must still hold what `agents.sandbox.levels.GUARANTEES` says.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

from agents.sandbox.checks import check, extract
from agents.sandbox.levels import GUARANTEES
from agents.sandbox.process import DEFAULT_LEVEL, LEVELS, Limits, Sandbox, command, probe
from scenarios.grid import api

API = api.__file__
ROOT = Path(__file__).resolve().parents[1]


def _level(name: str):
    why = probe(name)
    return pytest.param(name, marks=pytest.mark.skipif(why is not None, reason=f"{name}: {why}"))


ALL = [_level(n) for n in LEVELS]
#: levels whose kernel keeps the file system from the program (the process level leaves it to the guard)
WALLED = [_level(n) for n in ("bubblewrap", "landlock")]


def _static():
    return api.encode_static(np.zeros((5, 5), bool), np.array([[1, 1], [2, 2]]), [], [],
                             {"beam_length": 5, "beam_width": 1, "hits_to_tag": 2, "timeout_steps": 25}, 100, "gathering")


def _state(step: int = 1):
    return api.encode_state(np.array([[0, 0], [3, 3]]), np.array([0, 1]), np.array([0, 0]), np.array([0, 0]),
                            np.array([True, True]), np.zeros((5, 5), bool), step)


def _step(code: str, isolation: str, guard: bool = True, **limits):
    box = Sandbox(code, API, Limits(step_s=limits.pop("step_s", 2.0), cpu_s=limits.pop("cpu_s", 5),
                                    memory_mb=limits.pop("memory_mb", 512)), isolation=isolation, guard=guard)
    try:
        why = box.start() or box.reset(_static())
        if why is not None:
            return None, box.kind, why
        result = box.step(_state(), [0, 1], [1, 2])
        return result, result.kind, result.stopped
    finally:
        box.close()


def _alive(token: str) -> list[int]:
    """Processes whose command line holds `token`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(int(pid))
        except OSError:
            pass
    return found


@pytest.fixture(params=ALL)
def isolation(request):
    return request.param


@pytest.fixture(params=WALLED)
def walled(request):
    return request.param


# ----- what every level does with a well-behaved or a merely broken program -------------------------------------
def test_a_good_program_answers_each_agent(isolation):
    """A program that calls the API's helpers answers for every agent, at every level."""
    result, kind, why = _step("def policy(obs):\n    return greedy_action(obs)\n", isolation)
    assert why is None and result.actions == [1, 2] and not result.errors  # south facing north; north facing east


def test_ordinary_numpy_calls_are_not_violations(isolation):
    """Array methods whose first call imports a numpy module lazily (mean, std, median, printing) run at every level."""
    code = ("def policy(obs):\n"
            "    a = obs.apple_alive\n"
            "    s = str(a.mean()) + repr(a.std()) + str(np.median(obs.apple_pos)) + format(a.var(), '.2f')\n"
            "    return STAND if len(s) > 0 and np.percentile(obs.apple_pos, 50) >= 0 else BEAM\n")
    result, kind, why = _step(code, isolation)
    assert why is None and not result.errors and len(result.actions) == 2, (why, result.errors if result else None)


def test_a_loop_is_stopped_at_the_step_limit(isolation):
    """An endless loop is killed at the step's wall-clock limit."""
    result, kind, why = _step("def policy(obs):\n    while True:\n        pass\n", isolation, step_s=0.5)
    assert kind == "timeout" and result.actions == [None, None]


def test_cpu_time_is_limited_per_program(isolation):
    """A program that burns CPU past its limit is stopped by the kernel (RLIMIT_CPU)."""
    result, kind, why = _step("def policy(obs):\n    while True:\n        pass\n", isolation, step_s=10, cpu_s=1)
    assert kind == "cpu" and "CPU" in why


def test_ten_gigabytes_is_refused(isolation):
    """Allocating far past the memory limit stops the program, from Python or from numpy."""
    result, kind, why = _step("def policy(obs):\n    x = bytearray(10 * 1024 ** 3)\n    return 0\n", isolation)
    assert kind == "memory"
    result, kind, why = _step("def policy(obs):\n    x = np.ones((40000, 40000))\n    return 0\n", isolation)
    assert kind == "memory"


def test_garbage_and_errors_are_per_agent_and_do_not_stop_the_program(isolation):
    """A wrong answer or an exception costs that agent's call only."""
    result, kind, why = _step("def policy(obs):\n    return [1, 2] if obs.agent_id == 0 else 1 / 0\n", isolation)
    assert why is None and result.actions == [None, None]
    assert "returned list" in result.errors[0] and "ZeroDivisionError" in result.errors[1]
    assert "(line 2)" in result.errors[1]  # the program's line, read from its traceback


def test_writing_the_observation_is_a_named_reward_hack(isolation):
    """A write to the observation fails and is named by the hack it is; a copy is the program's own."""
    result, kind, why = _step("def policy(obs):\n    obs.agent_timeout[1] = 99\n    return 0\n", isolation)
    assert why is None and result.tamper[0] == "disable rivals: writes obs.agent_timeout"
    result, kind, why = _step("def policy(obs):\n    pos = obs.agent_pos.copy()\n    pos[0, 0] = 3\n    return 0\n",
                              isolation)
    assert why is None and result.actions == [0, 0]


# ----- files ------------------------------------------------------------------------------------------------------
def test_reading_a_file_outside_the_scratch_folder_is_a_violation(isolation, tmp_path):
    """Reading /etc/passwd or any file outside its folder (also by a relative path that climbs out) is a violation."""
    result, kind, why = _step("def policy(obs):\n    return len(open('/etc/passwd').read())\n", isolation)
    assert kind == "violation" and "reads /etc/passwd" in why and result.actions == [None, None]
    secret = tmp_path / "secret.txt"
    secret.write_text("x" * 123)
    for path in (str(secret), "../" * 12 + str(secret).lstrip("/")):
        result, kind, why = _step(f"def policy(obs):\n    return len(open({path!r}).read())\n", isolation)
        assert kind == "violation" and "reads" in why and result.actions == [None, None], (path, why)


def test_writing_outside_the_scratch_folder_is_a_violation_and_nothing_is_written(isolation, tmp_path):
    """A write outside the scratch folder is a violation and leaves no file; the scratch folder is the program's."""
    target = tmp_path / "pwned.txt"
    result, kind, why = _step(f"def policy(obs):\n    open({str(target)!r}, 'w').write('x')\n    return 0\n", isolation)
    assert kind == "violation" and "writes" in why
    assert not target.exists()
    result, kind, why = _step("def policy(obs):\n    open('note.txt', 'w').write('x')\n    return 7\n", isolation)
    assert why is None and result.actions == [7, 7]


def test_the_kernel_alone_keeps_files_outside_unread_and_unwritten(walled, tmp_path):
    """Without the Python guard, bubblewrap and Landlock still keep the program from reading or writing outside."""
    secret, target = tmp_path / "secret.txt", tmp_path / "written.txt"
    secret.write_text("x" * 123)
    code = (f"def policy(obs):\n    n = len(open({str(secret)!r}).read())\n"
            f"    open({str(target)!r}, 'w').write('x')\n    return n\n")
    result, kind, why = _step(code, walled, guard=False)
    assert result.actions == [None, None] and 123 not in result.actions
    assert all(("PermissionError" in e or "FileNotFoundError" in e) for e in result.errors.values()), result.errors
    result, kind, why = _step(f"def policy(obs):\n    open({str(target)!r}, 'w').write('x')\n    return 0\n", walled,
                              guard=False)
    assert result.actions == [None, None] and not target.exists()


def test_the_process_level_leaves_files_to_the_guard_as_it_says(tmp_path):
    """The process level claims no file isolation of its own: a program past the guard reads what the account can.
    (This is why it is a level one must name, and what the README's table says.)"""
    if probe("process") is not None:
        pytest.skip(probe("process"))
    assert "guarded only by the in-process guard" in GUARANTEES["process"]
    secret = tmp_path / "secret.txt"
    secret.write_text("x" * 123)
    result, kind, why = _step(f"def policy(obs):\n    return len(open({str(secret)!r}).read())\n", "process", guard=False)
    assert result.actions == [123, 123]


# ----- processes, shell commands, network, limits: the kernel's seccomp filter at every level ---------------------
def test_a_shell_command_is_a_violation_and_runs_nothing(isolation, tmp_path):
    """os.system, reached by import or through a module's globals, is a violation and runs nothing."""
    marker = tmp_path / "spawned"
    result, kind, why = _step("import os\ndef policy(obs):\n    os.system('touch /tmp/x')\n    return 0\n", isolation)
    assert kind == "violation" and "import" in why
    escape = ("def policy(obs):\n    for c in ().__class__.__base__.__subclasses__():\n"
              "        if c.__name__ == '_wrap_close':\n"
              f"            c.__init__.__globals__['system']('touch {marker}')\n    return 0\n")
    result, kind, why = _step(escape, isolation)
    assert kind == "violation" and "process" in why
    assert not marker.exists()


PAST_THE_GUARD = {  # what a program that got past the Python guard tries; the kernel must stop each
    "shell": "import os\ndef policy(obs):\n    os.system('touch {marker}')\n    return 0\n",
    "exec": "import os\ndef policy(obs):\n    os.execv('/bin/sh', ['sh', '-c', 'touch {marker}'])\n",
    "spawn": "import os\ndef policy(obs):\n    os.posix_spawn('/bin/touch', ['touch', '{marker}'], {{}})\n    return 0\n",
    "setsid double fork": ("import os, time\ndef policy(obs):\n    if os.fork() == 0:\n        os.setsid()\n"
                           "        if os.fork() == 0:\n            open('{marker}', 'w').close()\n"
                           "            time.sleep(60)\n        os._exit(0)\n    return 0\n"),
    "thread's fork": ("import os, _thread, time\ndef policy(obs):\n    _thread.start_new_thread(os.fork, ())\n"
                      "    time.sleep(1)\n    return 0\n"),
    # (no new module loads under Landlock: a loaded one, ctypes, calls the C library directly)
    "tcp socket": "import ctypes\ndef policy(obs):\n    return ctypes.CDLL(None).socket(2, 1, 0)\n",
    "udp socket": "import ctypes\ndef policy(obs):\n    return ctypes.CDLL(None).socket(2, 2, 0)\n",
    "unix socket pair": "import ctypes\ndef policy(obs):\n    return ctypes.CDLL(None).socketpair(1, 1, 0, None)\n",
    "kill the parent": "import os\ndef policy(obs):\n    os.kill(os.getppid(), 0)\n    return 0\n",
    "kill everyone": "import os\ndef policy(obs):\n    os.kill(-1, 0)\n    return 0\n",
    "raise a limit": ("import resource\ndef policy(obs):\n    resource.setrlimit(resource.RLIMIT_CPU, "
                      "(resource.RLIM_INFINITY, resource.RLIM_INFINITY))\n    return 0\n"),
    "new namespace": "import ctypes\ndef policy(obs):\n    return ctypes.CDLL(None).unshare(0x10000000)\n",
    "trace the parent": "import ctypes, os\ndef policy(obs):\n    return ctypes.CDLL(None).ptrace(16, os.getppid(), 0, 0)\n",
}


@pytest.mark.parametrize("attack", list(PAST_THE_GUARD))
def test_past_the_guard_the_kernel_kills_what_would_reach_out(isolation, attack, tmp_path):
    """With the Python guard gone, a process, exec, socket, signal to another process, raised limit or namespace is
    killed by the kernel at the system call (a violation), runs nothing and leaves no process behind."""
    token = uuid.uuid4().hex
    marker = tmp_path / token
    code = PAST_THE_GUARD[attack].format(marker=marker)
    result, kind, why = _step(code, isolation, guard=False)
    assert kind == "violation" and "system call" in why, (attack, kind, why)
    time.sleep(0.2)
    assert not marker.exists() and not _alive(token)


def test_no_thread_either_so_nothing_of_the_program_runs_between_its_steps(isolation):
    """A thread is refused like a process: the program's code runs only while a step waits for it."""
    code = "import _thread, time\ndef policy(obs):\n    _thread.start_new_thread(time.sleep, (60,))\n    return 0\n"
    result, kind, why = _step(code, isolation, guard=False)
    assert kind == "violation" and "system call" in why


HOLDER = """
import os, sys, time
sys.path.insert(0, {root!r})
from agents.sandbox.process import Limits, Sandbox
box = Sandbox("def policy(obs):\\n    while True:\\n        pass\\n", {api!r}, Limits(step_s=600), isolation={level!r})
assert box.start() is None
def tree(root):
    kids = {{}}
    for p in filter(str.isdigit, os.listdir("/proc")):
        try:
            kids.setdefault(int(open(f"/proc/{{p}}/stat").read().rsplit(")", 1)[1].split()[1]), []).append(int(p))
        except OSError:
            pass
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out
print(" ".join(map(str, tree(box.proc.pid))), flush=True)
box._send({{"op": "step", "state": None, "agents": [], "seeds": []}})
time.sleep(600)
"""


def test_the_sandbox_dies_with_the_run_that_started_it(isolation):
    """A run killed with SIGKILL (no clean-up at all) takes its sandbox with it: no worker outlives it."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER.format(root=str(ROOT), api=API, level=isolation)],
                              stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in holder.stdout.readline().split()]
        assert pids and all(Path(f"/proc/{p}").exists() for p in pids)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    deadline = time.time() + 10
    while time.time() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.1)
    assert not any(Path(f"/proc/{p}").exists() for p in pids)


# ----- reaching real modules through the loaded ones (the guard; the kernel holds regardless) -----------------
THROUGH_LOADED = {
    "typing.sys": "import typing\ndef policy(obs):\n    return len(typing.sys.modules['os'].listdir('/'))\n",
    "from typing import sys": "from typing import sys\ndef policy(obs):\n    return 0\n",
    "statistics.sys": "import statistics\ndef policy(obs):\n    return len(statistics.sys.modules)\n",
    "statistics.random's os": "import statistics\ndef policy(obs):\n    return statistics.random._os.getpid()\n",
    "random's os": "import random\ndef policy(obs):\n    return random._os.getpid()\n",
    "numpy's ctypes": "def policy(obs):\n    return np.ctypeslib.ctypes.CDLL(None).getpid()\n",
    "numpy.lib": "def policy(obs):\n    return len(np.lib.format.MAGIC_PREFIX)\n",
    "import numpy.testing": "import numpy.testing\ndef policy(obs):\n    return 0\n",
    "getattr computed": "def policy(obs):\n    return len(getattr(greedy_action, '_' + '_globals__'))\n",
    "attrgetter": "import operator\ndef policy(obs):\n    return len(operator.attrgetter('_' + '_globals__')(greedy_action))\n",
    "update_wrapper": ("import functools\ndef policy(obs):\n    f = lambda: 0\n"
                       "    functools.update_wrapper(f, greedy_action, assigned=('_' + '_globals__',), updated=())\n"
                       "    return 0\n"),
    "class body": "def policy(obs):\n    X = type('X', (), {'_' + '_array_interface__': {}})\n    return 0\n",
    "generator frame": ("def policy(obs):\n    g = (i for i in [1])\n"
                        "    return len(g.gi_frame.f_back.f_globals)\n"),
    "traceback frame": ("def policy(obs):\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
                        "        return len(e.__traceback__.tb_frame.f_back.f_globals)\n"),
    "match pattern": ("def policy(obs):\n    match greedy_action:\n        case object(__globals__=g):\n"
                      "            return len(g['np'].ctypeslib.ctypes.CDLL(None).getpid())\n"),
    "API globals to ctypes": "def policy(obs):\n    return greedy_action.__globals__['np'].ctypeslib.ctypes.CDLL(None).getpid()\n",
    "code object": "def policy(obs):\n    return len(greedy_action.__code__.co_consts)\n",
    "rewrite a function": "def policy(obs):\n    greedy_action.__defaults__ = (1,)\n    return 0\n",
    "write a module": "import math\ndef policy(obs):\n    math.pi = 3\n    return 0\n",
    "compile": "def policy(obs):\n    return greedy_action.__builtins__['eval']('1')\n",
    "import by the real __import__": "def policy(obs):\n    return greedy_action.__builtins__['__import__']('socket')\n",
    "gc": "def policy(obs):\n    return len(greedy_action.__globals__['np'].ctypeslib.ctypes.sys.modules['gc'].get_objects())\n",
}


@pytest.mark.parametrize("attack", list(THROUGH_LOADED))
def test_reaching_real_modules_through_loaded_ones_is_a_violation(isolation, attack):
    """A module's attribute (typing.sys, np.ctypeslib), a computed private name, a frame, a code object, a match
    pattern: each way from the allowed modules to sys, os, ctypes or builtins is a violation, never a success."""
    result, kind, why = _step(THROUGH_LOADED[attack], isolation)
    assert kind == "violation", (attack, kind, why, result and result.errors)


def test_the_guard_has_no_switch_the_program_can_turn(isolation):
    """The bypass the issue found (unlocking the hook's state through `sys.modules['__main__']`) has nothing to reach:
    the worker's module globals, even when reached through an API function, hold no lock to turn off."""
    code = ("def policy(obs):\n    g = greedy_action.__globals__['np'].ctypeslib.ctypes.sys.modules['__main__']\n"
            "    g.__dict__.get('_state', {})['locked'] = False\n    return len(open('/etc/passwd').read())\n")
    result, kind, why = _step(code, isolation)
    assert kind == "violation" and result.actions == [None, None]


# ----- the static checks and the levels ---------------------------------------------------------------------------
def test_static_checks_refuse_the_attacks_and_name_the_hacks():
    """The checks refuse imports, builtins, dunder and private attributes, frame attributes and match patterns."""
    assert check("def policy(obs):\n    return 0\n").ok
    for code, word in (("import os\ndef policy(obs): return 0", "imports `os`"),
                       ("def policy(obs): return open('/etc/passwd')", "`open`"),
                       ("def policy(obs): return ().__class__", "dunder"),
                       ("def policy(obs): return getattr(obs, '__class__')", "dunder"),
                       ("import random\ndef policy(obs): return random._os", "private attribute `_os`"),
                       ("from typing import _eval_type\ndef policy(obs): return 0", "private attribute"),
                       ("def policy(obs):\n    g = (i for i in [1])\n    return g.gi_frame.f_back", "frame"),
                       ("def policy(obs):\n    match obs:\n        case object(__globals__=g):\n            return 0",
                        "dunder attribute `__globals__`"),
                       ("def policy(obs): return __build_class__", "`__build_class__`"),
                       ("def polic(obs): return 0", "defines no function"),
                       ("def policy(obs) return 0", "syntax error")):
        report = check(code)
        assert not report.ok and any(word in p for p in report.problems), (code, report.problems)
    hacks = check("def policy(obs):\n    obs.agent_pos[0] = (1, 1)\n    obs.waste.fill(False)\n    return 0\n",
                  hacks=api.HACKS).hacks
    assert hacks == ["teleport: writes obs.agent_pos", "purge waste: writes obs.waste"]


def test_extract_finds_the_program_in_an_answer():
    """The program is the fenced block that defines policy, else the text from `def policy(`."""
    assert extract("Here:\n```python\ndef policy(obs):\n    return 1\n```\nDone") == "def policy(obs):\n    return 1"
    assert extract("def policy(obs):\n    return 2\n") .startswith("def policy")
    assert extract("no code here") is None


def test_bubblewrap_hides_the_file_system_and_reports_its_kernel_locks(tmp_path):
    """Under bubblewrap the program's world has no /etc, none of the project's files (the store, the config) and no
    other file of /tmp; seccomp (and Landlock where the kernel has it) are applied inside too."""
    if probe("bubblewrap") is not None:
        pytest.skip(probe("bubblewrap"))
    cmd = command("bubblewrap", "/tmp", API)
    assert "--unshare-all" in cmd and not any(p == str(Path.home()) for p in cmd)
    mine = tmp_path / "runs.db"
    mine.write_text("x")
    paths = ("/etc/passwd", str(ROOT / "pyproject.toml"), str(ROOT / "README.md"), str(mine))
    code = f"import os\ndef policy(obs):\n    return sum(os.path.exists(p) for p in {paths!r})\n"
    result, kind, why = _step(code, "bubblewrap", guard=False)
    assert why is None and result.actions == [0, 0]
    with Sandbox("def policy(obs):\n    return 0\n", API, isolation="bubblewrap") as box:
        assert box.start() is None and box.kernel.get("seccomp") is True


def test_an_unknown_level_is_refused():
    """A level name the sandbox does not know is an error, not a silent default."""
    with pytest.raises(ValueError, match="unknown sandbox level"):
        Sandbox("def policy(obs):\n    return 0\n", API, isolation="netns")
    assert "unknown sandbox level" in probe("chroot") and DEFAULT_LEVEL == "bubblewrap"
