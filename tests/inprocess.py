"""`societas ARGS` run inside the test process, as a new `python -m societas.cli ARGS` process would run it.

Most tests start the CLI to read what a command prints, exits with or stores, not to test the process
around it; starting Python and importing the stack costs seconds a call on 2 cores (and the embedded
model a load each time), running `main()` here costs milliseconds. `run` gives the command what a new
process would have, and takes back after it what the process would have taken with it when it ended:

- its own file descriptors 0, 1 and 2 (stdin /dev/null, stdout and stderr files read back as text, as
  `subprocess.run(..., capture_output=True, text=True)` reads its pipes), so the processes it starts
  write where its own output goes; the CLI's rich consoles set up anew for them (width, colour, quiet);
- the working directory, $COLUMNS and the environment, sys.argv, sys.path (the working directory first);
- Python's default warning filters and their printing on stderr (not pytest's recording), the root
  logger without pytest's handlers, signal handlers, torch's thread count;
- what it registered (user scenarios, prompt templates, strategies of classes loaded before it, modules
  imported from user files or from a temporary folder) is dropped after it; the stores it opened are
  closed (atexit), a forkserver it started is stopped, and the functools caches of the project's
  modules are emptied, as a process would end;
- an exception escaping `main()` is a traceback on stderr and exit code 1; a call longer than its
  timeout raises `subprocess.TimeoutExpired` (after it ends: it is not killed).

What it cannot be, and what must stay a real process (`tests.conftest.cli_process`): exit codes on
signals, a closed pipe, kill -9, import-time guards (which modules a command loads), commands that
replace the process (`societas app`: os.execv is refused here), concurrent commands, and anything that
reads the process id as the run's owner while the test process lives on. A model loaded by
`agents.llm.local.model.shared_lm` stays loaded between calls (it is read-only: the same answers).
"""

from __future__ import annotations

import atexit
import functools
import importlib
import io
import locale
import logging
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types
import warnings
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the packages of the project (their functools caches are emptied after each call)
PROJECT = ("sim", "agents", "scenarios", "runner", "analysis", "societas")
#: Python's warning filters in a new process started without -W or $PYTHONWARNINGS (a release build)
DEFAULT_FILTERS = (("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, ""),
                   ("ignore", PendingDeprecationWarning, ""), ("ignore", ImportWarning, ""), ("ignore", ResourceWarning, ""))


def run(args: Sequence[str], *, env: dict[str, str | None], cwd: Path = ROOT,
        timeout: float | None = None) -> subprocess.CompletedProcess:
    """`python -m societas.cli ARGS` in this process, in folder `cwd`, with `env` changing the environment (None: unset):
    its exit code, stdout and stderr."""
    cmd = [sys.executable, "-m", "societas.cli", *args]
    started = time.monotonic()
    with ExitStack() as stack:
        stack.enter_context(_process_state(cwd, env, args))
        stack.enter_context(_registries())
        out, err = stack.enter_context(_own_fds())
        stack.enter_context(_default_warnings())
        stack.enter_context(_plain_logging())
        code = _main()
        sys.stdout.flush()
        sys.stderr.flush()
    stdout, stderr = _text(out), _text(err)
    if timeout is not None and time.monotonic() - started > timeout:
        raise subprocess.TimeoutExpired(cmd, timeout, output=stdout, stderr=stderr)
    return subprocess.CompletedProcess(cmd, code, stdout, stderr)


def _main() -> int:
    """Run the console script's `main()` and what a process does after it (atexit): its exit code."""
    app = importlib.import_module("societas.cli.app")
    app.out.__init__()  # a new process's consoles: width from $COLUMNS, no colour off a terminal, not quiet
    app.err.__init__(stderr=True)
    closing: list[tuple[Any, tuple, dict]] = []

    def register(f: Any, *a: Any, **k: Any) -> Any:
        closing.append((f, a, k))
        return f

    def unregister(f: Any) -> None:
        closing[:] = [c for c in closing if c[0] is not f]

    app.atexit = types.SimpleNamespace(register=register, unregister=unregister)
    try:
        try:
            app.main()
            code: int = 0
        except SystemExit as exc:
            code = _exit_code(exc.code)
        except KeyboardInterrupt:
            raise
        except BaseException:  # noqa: BLE001 - a process prints the traceback and exits 1
            traceback.print_exc()
            code = 1
        for f, a, k in reversed(closing):
            try:
                f(*a, **k)
            except Exception:  # noqa: BLE001 - as Python reports a failing atexit callback
                print("Exception ignored in atexit callback", f, file=sys.stderr)
                traceback.print_exc()
    finally:
        app.atexit = atexit
    return code


def _exit_code(code: Any) -> int:
    """The exit status `sys.exit(code)` gives a process (a message is printed on stderr, status 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _text(f: Any) -> str:
    """A captured stream as `subprocess.run(text=True)` reads it: the locale's encoding, universal newlines."""
    f.seek(0)
    data = f.read()
    f.close()
    return io.TextIOWrapper(io.BytesIO(data), encoding=locale.getpreferredencoding(False)).read()


@contextmanager
def _process_state(cwd: Path, env: dict[str, str | None], args: Sequence[str]) -> Iterator[None]:
    """cwd, environment, argv, sys.path, signal handlers and torch's threads of a new process; put back after."""
    old_cwd, old_env, old_argv, old_path = os.getcwd(), dict(os.environ), sys.argv, list(sys.path)
    handlers = {s: signal.getsignal(s) for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP)}
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    forkserver = _forkserver_pid()
    execv = os.execv
    os.chdir(cwd)
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    sys.argv = [str(ROOT / "societas" / "cli" / "__main__.py"), *args]
    sys.path.insert(0, os.getcwd())  # `python -m` puts its working directory first
    importlib.invalidate_caches()  # a new process finds files written since the last import

    def refuse_exec(*_: Any) -> None:
        raise RuntimeError("this command replaces its process (os.execv): run it with cli_process")

    os.execv = refuse_exec
    try:
        yield
    finally:
        os.execv = execv
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(old_env)
        sys.argv = old_argv
        sys.path[:] = old_path
        for s, h in handlers.items():
            if h is not None and signal.getsignal(s) is not h:
                signal.signal(s, h)
        if threads is not None and torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
        if forkserver is None and _forkserver_pid() is not None:  # started by this command: it ends with it
            sys.modules["multiprocessing.forkserver"]._forkserver._stop()


def _forkserver_pid() -> int | None:
    module = sys.modules.get("multiprocessing.forkserver")
    return getattr(module._forkserver, "_forkserver_pid", None) if module is not None else None


@contextmanager
def _own_fds() -> Iterator[tuple[Any, Any]]:
    """File descriptors 0, 1, 2 and sys.stdin/stdout/stderr of a process started with stdin closed and both outputs
    captured (what it and the processes it starts write lands in two files, yielded)."""
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    streams = sys.stdin, sys.stdout, sys.stderr
    for s in streams[1:]:
        try:
            s.flush()
        except (AttributeError, OSError, ValueError):
            pass
    saved = {fd: os.dup(fd) for fd in (0, 1, 2)}
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    encoding = os.environ.get("PYTHONIOENCODING", "").partition(":")[0] or locale.getpreferredencoding(False)
    sys.stdin = open(0, encoding=encoding, closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding=encoding, closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding=encoding, errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115
    try:
        yield out, err
    finally:
        for s in (sys.stdout, sys.stderr):
            try:
                s.flush()
            except (OSError, ValueError):
                pass
        sys.stdin, sys.stdout, sys.stderr = streams
        for fd, copy in saved.items():
            os.dup2(copy, fd)
            os.close(copy)


@contextmanager
def _default_warnings() -> Iterator[None]:
    """Python's own warning filters (pytest's are set aside) and warnings printed on stderr, as in a new process."""
    with warnings.catch_warnings():
        warnings.resetwarnings()
        for action, category, module in DEFAULT_FILTERS:
            warnings.filterwarnings(action, category=category, module=module, append=True)
        warnings._processoptions(sys.warnoptions)  # type: ignore[attr-defined] - what Python does at start-up
        warnings.showwarning = warnings._showwarning_orig  # type: ignore[attr-defined]
        warnings._showwarnmsg_impl = _print_warning  # type: ignore[attr-defined]
        yield


def _print_warning(msg: warnings.WarningMessage) -> None:
    file = msg.file or sys.stderr
    try:
        file.write(warnings._formatwarnmsg(msg))  # type: ignore[attr-defined]
    except OSError:
        pass


@contextmanager
def _plain_logging() -> Iterator[None]:
    """The root logger of a new process: no handlers (records reach Python's last-resort handler), level WARNING."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = []
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:
        root.handlers = handlers
        root.setLevel(level)


@contextmanager
def _registries() -> Iterator[None]:
    """What a command registers or caches in its process (scenarios, templates, strategies, user modules, stores of
    sweep workers, functools caches) is dropped when it ends."""
    from scenarios import registry
    from sim.core import refs

    scenarios = dict.copy(registry.REGISTRY)
    strategies = {cls: cls.__dict__.get("strategies") for cls in scenarios.values() if isinstance(cls, type)}
    by_path, by_name = dict(refs._BY_PATH), dict(refs._FILE_MODULES_BY_NAME)
    prompts = sys.modules.get("agents.llm.prompts")
    templates = dict(prompts.PROMPT_TEMPLATES) if prompts is not None else {}
    worker = sys.modules.get("runner.sweeps.worker")
    stores = set(worker._STORES) if worker is not None else set()
    modules = set(sys.modules)
    try:
        yield
    finally:
        for key in [k for k in dict.keys(registry.REGISTRY) if k not in scenarios]:
            dict.__delitem__(registry.REGISTRY, key)
        for key, value in scenarios.items():
            if not isinstance(value, str):  # (a built-in it loaded stays loaded: the same class on every import)
                dict.__setitem__(registry.REGISTRY, key, value)
        for cls, value in strategies.items():
            if cls.__dict__.get("strategies") is not value:
                if value is None:
                    delattr(cls, "strategies")
                else:
                    cls.strategies = value
        for name in set(refs._FILE_MODULES_BY_NAME) - set(by_name):
            sys.modules.pop(name, None)
        refs._BY_PATH.clear()
        refs._BY_PATH.update(by_path)
        refs._FILE_MODULES_BY_NAME.clear()
        refs._FILE_MODULES_BY_NAME.update(by_name)
        prompts = sys.modules.get("agents.llm.prompts")
        if prompts is not None:
            prompts.PROMPT_TEMPLATES.clear()
            prompts.PROMPT_TEMPLATES.update(templates)
        worker = sys.modules.get("runner.sweeps.worker")
        if worker is not None:
            for url in set(worker._STORES) - stores:
                worker._STORES.pop(url).close()
        _drop_user_modules(set(sys.modules) - modules)
        _clear_caches()


def _drop_user_modules(names: set[str]) -> None:
    """Forget modules a command imported from a temporary folder (a user's scenario module beside a test's store):
    the next command imports them anew, as a new process would."""
    keep = tuple(str(Path(p).resolve()) + os.sep for p in (ROOT, sys.prefix, sys.base_prefix))
    temp = str(Path(tempfile.gettempdir()).resolve()) + os.sep
    for name in names:
        source = getattr(sys.modules.get(name), "__file__", None)
        if source:
            where = str(Path(source).resolve())
            if where.startswith(temp) and not where.startswith(keep):
                sys.modules.pop(name, None)


def _clear_caches() -> None:
    """Empty every functools cache at the top level of the project's modules (or of their classes)."""
    for name, module in list(sys.modules.items()):
        if module is None or name.partition(".")[0] not in PROJECT:
            continue
        for value in list(vars(module).values()):
            for obj in (value, *vars(value).values()) if isinstance(value, type) else (value,):
                if isinstance(obj, functools._lru_cache_wrapper):  # type: ignore[attr-defined]
                    obj.cache_clear()
