"""The parent side of the sandbox: one child process per program and episode, spoken to over pipes.

The child runs under one of three isolation levels (`LEVELS`, strongest first; what each guarantees is in
`agents.sandbox.levels`). A level is chosen by name (a run's `sandbox` field), never silently: where the
named level cannot be had, the child does not start (`probe` says why before a run stores anything).

- `bubblewrap` (Debian's `bwrap`; the default): new user, network, PID, IPC, UTS and mount namespaces; a file
  system that holds only the Python installation (read-only), the worker's folder and the policy API
  (read-only), an empty /tmp and the program's scratch folder (the one place it can write); plus the kernel
  locks below, Landlock where the kernel has it;
- `landlock`: no namespaces; Landlock limits every file the child opens, creates or removes to its scratch
  folder; the seccomp filter;
- `process`: no namespaces, no file-system rules: the seccomp filter and the worker's guard only.

At every level the worker installs the seccomp filter (`agents.sandbox.kernel`: no process, thread, exec, socket or
signal to others; a try kills it), sets resource limits (memory, CPU seconds, file size, open files) and its
guard (`agents.sandbox.worker`), and the parent holds a wall-clock limit per step and per load: a program that
loops is killed, not waited for. Nothing the child sends is trusted: replies are JSON of bounded size, read
with a deadline.
"""

from __future__ import annotations

import json
import os
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

import numpy

from agents.sandbox.checks import ALLOWED_IMPORTS, INTROSPECTION
from agents.sandbox.worker import UNAVAILABLE_EXIT, VIOLATION_EXIT

WORKER = Path(__file__).resolve().with_name("worker.py")
MAX_REPLY = 16 * 1024 * 1024  # bytes a reply may have
#: isolation levels, strongest first (`agents.sandbox.levels` says what each guarantees)
LEVELS = ("bubblewrap", "landlock", "process")
#: the level a run gets unless it names another
DEFAULT_LEVEL = "bubblewrap"
#: whether the worker applies Landlock at each level: required, where the kernel has it, or not
_LANDLOCK = {"bubblewrap": "try", "landlock": "require", "process": None}


@dataclass(frozen=True)
class Limits:
    """What one program may use: memory (address space), CPU seconds over its episode, wall seconds per step
    (every agent's call of one tick) and for loading."""

    memory_mb: int = 512
    cpu_s: int = 60
    step_s: float = 2.0
    load_s: float = 20.0


@dataclass
class StepResult:
    """One step's answers: an action (or None) per agent, errors and tampering by position, and `stopped`: why
    the program was stopped for good (timeout, CPU, memory, violation), else None."""

    actions: list[Any]
    errors: dict[int, str] = field(default_factory=dict)
    tamper: dict[int, str] = field(default_factory=dict)
    stopped: Optional[str] = None
    kind: Optional[str] = None  # the stop's kind: timeout | cpu | memory | violation | unavailable | crash


class Sandbox:
    """One program in its own process. `start()` loads it; `reset(static)` starts an episode; `step(...)` runs it
    for a batch of agents; `close()` ends it. A stopped sandbox answers every later step with `stopped`."""

    def __init__(self, code: str, api: Optional[str], limits: Limits = Limits(), *, entry: str = "policy",
                 isolation: Optional[str] = None, guard: bool = True) -> None:
        """`isolation`: one of `LEVELS` (default `DEFAULT_LEVEL`); `guard=False` leaves out the worker's Python
        guard (its audit hook, views and guarded builtins) so that tests can show what the kernel holds alone."""
        if isolation is not None and isolation not in LEVELS:
            raise ValueError(f"unknown sandbox level {isolation!r}; one of {', '.join(LEVELS)}")
        self.code, self.entry = code, entry
        self.api = str(Path(api).resolve()) if api else None
        self.limits, self.guard = limits, guard
        self.isolation = isolation or DEFAULT_LEVEL
        self.kernel: dict[str, Any] = {}  # the kernel locks the worker applied (seccomp, landlock ABI)
        self.scratch = os.path.realpath(tempfile.mkdtemp(prefix="societas-policy-"))
        self.proc: Optional[subprocess.Popen] = None
        self.stopped: Optional[str] = None
        self.kind: Optional[str] = None
        self._buffer = b""

    # ----- life ------------------------------------------------------------------------------------------------
    def start(self) -> Optional[str]:
        """Start the child and load the program: None when it is ready, else why it is not (also kept in `stopped`)."""
        cmd = command(self.isolation, self.scratch, self.api)
        if cmd is None:
            return self._stop("sandbox unavailable: bubblewrap (bwrap) is not installed", "unavailable")
        env = {"PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "PATH": "/usr/bin:/bin"}
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, env=env, start_new_session=True, close_fds=True)
        except OSError as exc:
            return self._stop(f"sandbox unavailable: {cmd[0]} cannot start ({exc.strerror})", "unavailable")
        sent = self._send({"code": self.code, "api": self.api, "scratch": self.scratch, "entry": self.entry,
                           "allowed": sorted(ALLOWED_IMPORTS), "introspection": sorted(INTROSPECTION),
                           "landlock": _LANDLOCK[self.isolation], "guard": self.guard,
                           "limits": {"memory_mb": self.limits.memory_mb, "cpu_s": self.limits.cpu_s}})
        reply = self._receive(self.limits.load_s) if sent else None
        if reply is None:
            return self._stop_from_exit("while loading")
        if not reply.get("ok"):
            if reply.get("violation"):
                return self._stop(f"sandbox violation: {str(reply['violation'])[:300]}", "violation")
            if reply.get("unavailable"):
                return self._stop(f"sandbox unavailable: {str(reply['unavailable'])[:300]}", "unavailable")
            if reply.get("memory"):
                return self._stop(f"memory limit ({self.limits.memory_mb} MB) while loading", "memory")
            return self._stop(f"does not load: {reply.get('error', 'unknown error')}", "error")
        self.kernel = reply.get("kernel") if isinstance(reply.get("kernel"), dict) else {}
        return None

    def reset(self, static: Any) -> Optional[str]:
        """Hand the child an episode's fixed data (the map): None, or why the program stopped."""
        if self.stopped:
            return self.stopped
        if not self._send({"op": "reset", "static": static}):
            return self._stop_from_exit("at reset")
        reply = self._receive(self.limits.load_s)
        return None if reply is not None else self._stop_from_exit("at reset")

    def step(self, state: Any, agents: list[int], seeds: list[int]) -> StepResult:
        """Run the program for `agents` (their ids, in order) on this step's `state`, each call seeded."""
        n = len(agents)
        if self.stopped:
            return StepResult([None] * n, stopped=self.stopped, kind=self.kind)
        if not self._send({"op": "step", "state": state, "agents": agents, "seeds": seeds}):
            self._stop_from_exit("during a step")
            return StepResult([None] * n, stopped=self.stopped, kind=self.kind)
        reply = self._receive(self.limits.step_s)
        if reply is None:
            self._stop_from_exit("during a step")
            return StepResult([None] * n, stopped=self.stopped, kind=self.kind)
        if reply.get("violation"):  # the worker's last message: it has exited
            self._stop(f"sandbox violation: {str(reply['violation'])[:300]}", "violation")
            return StepResult([None] * n, stopped=self.stopped, kind=self.kind)
        if reply.get("memory"):
            self._stop(f"memory limit ({self.limits.memory_mb} MB)", "memory")
            return StepResult([None] * n, stopped=self.stopped, kind=self.kind)
        actions = reply.get("actions")
        if not isinstance(actions, list):
            self._stop("sent a malformed reply", "crash")
            return StepResult([None] * n, stopped=self.stopped, kind=self.kind)
        actions = (actions + [None] * n)[:n]
        errors = _by_position(reply.get("errors"), n)
        tamper = _by_position(reply.get("tamper"), n)
        return StepResult(actions, errors, tamper)

    def close(self) -> None:
        """End the child (killed if it does not exit) and remove its scratch folder."""
        if self.proc is not None:
            try:
                if self.proc.poll() is None:
                    self.proc.stdin.close()  # type: ignore[union-attr]
                    try:
                        self.proc.wait(timeout=0.5)
                    except subprocess.TimeoutExpired:
                        self._kill()
            except OSError:
                self._kill()
            for stream in (self.proc.stdin, self.proc.stdout):
                try:
                    stream.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            self.proc = None
        shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ----- plumbing ---------------------------------------------------------------------------------------------
    def _kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def _stop(self, why: str, kind: str) -> str:
        if self.stopped is None:
            self.stopped, self.kind = why, kind
        self._kill()
        return self.stopped

    def _stop_from_exit(self, when: str) -> str:
        """Why the child is gone or silent: its exit signal, or the wall-clock limit (then it is killed)."""
        proc = self.proc
        code = proc.poll() if proc is not None else None
        if code is None:
            limit = self.limits.step_s if when == "during a step" else self.limits.load_s
            return self._stop(f"timeout: no answer within {limit:g} s {when}", "timeout")
        if code in (-signal.SIGSYS, 128 + signal.SIGSYS):
            return self._stop(f"sandbox violation: a system call the sandbox forbids {when} (a process, exec, socket, "
                              "signal or limit change: the kernel killed it)", "violation")
        if code == VIOLATION_EXIT:
            return self._stop(f"sandbox violation {when} (its report was lost)", "violation")
        if code == UNAVAILABLE_EXIT:
            return self._stop(f"sandbox unavailable {when}", "unavailable")
        if code in (-signal.SIGXCPU, 128 + signal.SIGXCPU):
            return self._stop(f"CPU time limit ({self.limits.cpu_s} s) {when}", "cpu")
        if code in (-signal.SIGKILL, 128 + signal.SIGKILL):
            return self._stop(f"killed {when} (the CPU or memory limit)", "cpu")
        return self._stop(f"the policy process ended (exit {code}) {when}", "crash")

    def _send(self, message: dict) -> bool:
        data = json.dumps(message, separators=(",", ":")).encode()
        try:
            self.proc.stdin.write(struct.pack(">I", len(data)) + data)  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def _receive(self, timeout: float) -> Optional[dict]:
        """The next reply, or None when the child is gone, silent past `timeout`, or sends too much."""
        out = self.proc.stdout  # type: ignore[union-attr]
        fd = out.fileno()
        deadline = time.monotonic() + timeout
        need: Optional[int] = None
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                if need is None and len(self._buffer) >= 4:
                    (need,) = struct.unpack(">I", self._buffer[:4])
                    if need > MAX_REPLY:
                        self._stop(f"sent a reply of {need} bytes (at most {MAX_REPLY})", "crash")
                        return {"actions": None}
                if need is not None and len(self._buffer) >= 4 + need:
                    body, self._buffer = self._buffer[4:4 + need], self._buffer[4 + need:]
                    try:
                        reply = json.loads(body)
                    except (ValueError, RecursionError):
                        return {"actions": None}
                    return reply if isinstance(reply, dict) else {"actions": None}
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    return None
                chunk = os.read(fd, 1 << 20)
                if not chunk:
                    try:
                        self.proc.wait(timeout=2)  # type: ignore[union-attr]
                    except subprocess.TimeoutExpired:
                        pass
                    return None
                self._buffer += chunk


def _by_position(found: Any, n: int) -> dict[int, str]:
    out: dict[int, str] = {}
    if isinstance(found, dict):
        for k, v in found.items():
            try:
                i = int(k)
            except (TypeError, ValueError):
                continue
            if 0 <= i < n:
                out[i] = str(v)[:400]
    return out


# ----- isolation ------------------------------------------------------------------------------------------------
def _python() -> str:
    return sys.executable or shutil.which("python3") or "python3"


def _read_only_paths(api: Optional[str]) -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(_python())),
             str(WORKER.parent)}
    if api:
        paths.add(os.path.dirname(api))
    paths.add(os.path.dirname(os.path.dirname(numpy.__file__)))  # where the policy's numpy lives
    return sorted(p for p in paths if p and os.path.exists(p))


def command(isolation: str, scratch: str, api: Optional[str]) -> Optional[list[str]]:
    """The command line that starts a worker under `isolation` (None: bubblewrap is not installed)."""
    worker = [_python(), "-I", str(WORKER)]
    if isolation != "bubblewrap":
        return worker
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    cmd = [bwrap, "--tmpfs", "/tmp"]  # first: a later mount under /tmp (a checkout there, the scratch) stays seen
    for system in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        cmd += ["--ro-bind-try", system, system]
    for path in _read_only_paths(api):
        cmd += ["--ro-bind", path, path]
    cmd += ["--dev", "/dev", "--proc", "/proc", "--bind", scratch, scratch,
            "--unshare-all", "--die-with-parent", "--new-session", "--chdir", scratch, "--"]
    return cmd + worker


PROBE_CODE = "def policy(obs):\n    return 0\n"


def probe(isolation: str) -> Optional[str]:
    """None when `isolation` can be had on this machine now, else why not (one phrase). A real worker is started
    under it and must report its kernel locks; the answer is kept per level and per `bwrap` found on PATH."""
    if isolation not in LEVELS:
        return f"unknown sandbox level {isolation!r} (one of {', '.join(LEVELS)})"
    return _probe(isolation, shutil.which("bwrap") if isolation == "bubblewrap" else None)


@lru_cache(maxsize=16)
def _probe(isolation: str, bwrap: Optional[str]) -> Optional[str]:
    if isolation == "bubblewrap":
        if bwrap is None:
            return "bubblewrap (bwrap) is not installed"
        try:  # bwrap's own words when it cannot make namespaces here (no unprivileged user namespaces...)
            done = subprocess.run([bwrap, "--unshare-all", "--ro-bind", "/", "/", "--", "true"], capture_output=True,
                                  timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"bubblewrap cannot start here ({exc})"
        if done.returncode != 0:
            words = (done.stderr.decode(errors="replace").strip().splitlines() or [f"exit {done.returncode}"])[0]
            return f"bubblewrap cannot start here ({words[:200]})"
    with Sandbox(PROBE_CODE, None, Limits(load_s=30.0), isolation=isolation) as box:
        why = box.start()
        if why is not None:
            return why.removeprefix("sandbox unavailable: ")
        if not box.kernel.get("seccomp"):
            return "the seccomp filter was not applied"
        if isolation == "landlock" and not box.kernel.get("landlock"):
            return "Landlock was not applied"
    return None
