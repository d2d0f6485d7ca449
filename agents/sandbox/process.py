"""The parent side of the sandbox: one child process per program and episode, spoken to over pipes.

Isolation, strongest first, the first that works on this machine (checked once per process; the
environment variable `SOCIETAS_SANDBOX` = bubblewrap | netns | process forces one):

- `bubblewrap` (Debian's `bwrap`): new user, network, PID, IPC and UTS namespaces, no network at all; a
  file system that holds only the Python installation (read-only), the worker's own folder and the policy
  API (read-only), an empty /tmp and the program's scratch folder (the one place it can write): there is
  no /etc, no home, no project, no store to read or write;
- `netns` (`unshare --net --map-root-user`): no network; the file system is guarded by the worker's
  audit hook alone;
- `process`: a separate process with the worker's limits and audit hook only.

In every case the worker sets its own resource limits (memory, CPU seconds, file size, open files) and
its audit hook (see `agents.sandbox.worker`), and the parent holds a wall-clock limit per step and per
load: a program that loops is killed, not waited for. Nothing the child sends is trusted: replies are
JSON of bounded size, read with a deadline.
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

from agents.sandbox.checks import ALLOWED_IMPORTS

WORKER = Path(__file__).resolve().with_name("worker.py")
MAX_REPLY = 16 * 1024 * 1024  # bytes a reply may have
LEVELS = ("bubblewrap", "netns", "process")


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
    kind: Optional[str] = None  # the stop's kind: timeout | cpu | memory | violation | crash


class Sandbox:
    """One program in its own process. `start()` loads it; `reset(static)` starts an episode; `step(...)` runs it
    for a batch of agents; `close()` ends it. A stopped sandbox answers every later step with `stopped`."""

    def __init__(self, code: str, api: str, limits: Limits = Limits(), *, entry: str = "policy",
                 isolation: Optional[str] = None) -> None:
        self.code, self.api, self.limits, self.entry = code, str(Path(api).resolve()), limits, entry
        self.isolation = isolation or level()
        self.scratch = tempfile.mkdtemp(prefix="societas-policy-")
        self.proc: Optional[subprocess.Popen] = None
        self.stopped: Optional[str] = None
        self.kind: Optional[str] = None
        self._buffer = b""

    # ----- life ------------------------------------------------------------------------------------------------
    def start(self) -> Optional[str]:
        """Start the child and load the program: None when it is ready, else why it is not (also kept in `stopped`)."""
        cmd = command(self.isolation, self.scratch, self.api)
        env = {"PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
               "PATH": "/usr/bin:/bin"}
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     env=env, start_new_session=True, close_fds=True)
        sent = self._send({"code": self.code, "api": self.api, "scratch": self.scratch, "entry": self.entry,
                           "allowed": sorted(ALLOWED_IMPORTS),
                           "limits": {"memory_mb": self.limits.memory_mb, "cpu_s": self.limits.cpu_s}})
        reply = self._receive(self.limits.load_s) if sent else None
        if reply is None:
            return self._stop_from_exit("while loading")
        if not reply.get("ok"):
            if reply.get("violation"):
                return self._stop(f"sandbox violation: {reply['violation']}", "violation")
            if reply.get("memory"):
                return self._stop(f"memory limit ({self.limits.memory_mb} MB) while loading", "memory")
            return self._stop(f"does not load: {reply.get('error', 'unknown error')}", "error")
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
        result = StepResult(actions, errors, tamper)
        if reply.get("violation"):
            self._stop(f"sandbox violation: {str(reply['violation'])[:300]}", "violation")
            result.stopped, result.kind = self.stopped, self.kind
        return result

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


def _read_only_paths(api: str) -> list[str]:
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(_python())),
             str(WORKER.parent), os.path.dirname(api)}
    paths.add(os.path.dirname(os.path.dirname(numpy.__file__)))  # where the policy's numpy lives
    return sorted(p for p in paths if p and os.path.exists(p))


def command(isolation: str, scratch: str, api: str) -> list[str]:
    """The command line that starts a worker under `isolation`."""
    worker = [_python(), "-I", str(WORKER)]
    if isolation == "bubblewrap":
        cmd = ["bwrap", "--tmpfs", "/tmp"]  # first: a later mount under /tmp (a checkout there, the scratch) stays seen
        for system in ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin"):
            cmd += ["--ro-bind-try", system, system]
        for path in _read_only_paths(api):
            cmd += ["--ro-bind", path, path]
        cmd += ["--dev", "/dev", "--proc", "/proc", "--bind", scratch, scratch,
                "--unshare-all", "--die-with-parent", "--new-session", "--chdir", scratch, "--"]
        return cmd + worker
    if isolation == "netns":
        return ["unshare", "--net", "--map-root-user", "--"] + worker
    return worker


@lru_cache(maxsize=1)
def level() -> str:
    """The strongest isolation that works here (or the one `SOCIETAS_SANDBOX` names)."""
    forced = os.environ.get("SOCIETAS_SANDBOX", "").strip().lower()
    if forced in LEVELS:
        return forced
    for candidate in LEVELS[:-1]:
        tool = "bwrap" if candidate == "bubblewrap" else "unshare"
        if shutil.which(tool) is None:
            continue
        scratch = tempfile.mkdtemp(prefix="societas-probe-")
        try:
            cmd = command(candidate, scratch, str(WORKER))[:-3] + [_python(), "-I", "-c", "import numpy"]
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  timeout=30, check=False)
            if done.returncode == 0:
                return candidate
        except (OSError, subprocess.TimeoutExpired):
            pass
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return "process"
