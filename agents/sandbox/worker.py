"""The sandbox's child process: runs one program an LLM wrote, one step at a time, and nothing else.

Started by `agents.sandbox.process.Sandbox` as `python -I worker.py` (inside bubblewrap at the full level). It
talks over its stdin and stdout only (length-prefixed JSON), so what the program prints goes nowhere. Before the
program's first line runs, the worker:

1. sets its resource limits (address space, CPU seconds, file size, no core dumps) and dies with its parent;
2. moves into its scratch folder, empties its environment, imports numpy, the scenario's policy API and the
   allowed modules (`checks.ALLOWED_IMPORTS`) and compiles the program;
3. asks the kernel for its locks (`agents.sandbox.kernel`): Landlock file-system rules where the level uses
   them (the scratch folder only), then the seccomp filter (no process, thread, exec, socket, signal to others,
   limit raised...): these hold even against a program that gets past everything below;
4. builds the program's namespace: builtins without eval, exec, compile, vars, id, `__import__` or class
   statements (`open` stays: the hook below lets it reach the scratch folder only); `getattr`/`setattr`/`delattr`/`hasattr`/`type` that refuse private
   names (`_x`, `__x__`) and frame attributes; an `__import__` that hands out only views of the pre-imported
   allowed modules. A view shows a module's public attributes except other modules (`typing.sys`), and
   builtins that reach outside; `operator.attrgetter`, `methodcaller` and `functools.update_wrapper` refuse
   private names too. Reaching for a hidden name is a violation, not an AttributeError;
5. installs an audit hook (PEP 578) that, from then on and with no switch to turn it off, allows only files
   opened inside the scratch folder and the one `exec` of the program's own top level: every other audited
   event (an import that loads a module, compile, a process, a socket, ctypes, a frame or code object, a
   signal, gc's object lists...) is a violation.

A violation is fatal: the worker writes it to the parent as its last message and exits at once (exit code
`VIOLATION_EXIT`), so no `except` in the program can hide it. Each agent's `policy(obs)` call gets an
observation the API builds; its answer must be an int or a string (the parent checks it against the space).

This file imports only the standard library at module level: it runs outside the project.
"""

from __future__ import annotations

import builtins
import collections.abc
import functools
import importlib.util
import json
import operator
import os
import random
import resource
import struct
import sys
import types
from _json import encode_basestring_ascii
from typing import Any, Callable, Optional

#: the worker's exit code after a violation (its last message says what it was)
VIOLATION_EXIT = 86
#: the kernel layer could not be set up: the program never ran
UNAVAILABLE_EXIT = 87

_SAFE_BUILTINS = ("abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "complex",
                  "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hash", "hex",
                  "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next",
                  "object", "oct", "ord", "pow", "print", "range", "repr", "reversed", "round", "set", "slice",
                  "sorted", "str", "sum", "tuple", "zip", "True", "False", "None", "Exception", "ValueError",
                  "TypeError", "KeyError", "IndexError", "ZeroDivisionError", "ArithmeticError", "LookupError",
                  "RuntimeError", "StopIteration", "AttributeError", "NotImplementedError", "AssertionError",
                  "OverflowError", "NotImplemented", "Ellipsis", "staticmethod", "classmethod", "property", "super",
                  "BaseException", "MemoryError", "RecursionError",
                  # (the audit hook decides what it may do: files in the scratch folder only)
                  "open")
#: builtins no view of a module hands out (a module that re-exports one would hand out a way round the namespace)
_DANGEROUS = tuple(getattr(builtins, n) for n in ("getattr", "setattr", "delattr", "hasattr", "eval", "exec",
                                                    "compile", "open", "__import__", "vars", "globals", "locals",
                                                    "breakpoint", "input", "dir", "exit", "quit", "help", "id")
                   if hasattr(builtins, n))
#: submodules of allowed modules a program may reach (imported before the lock)
_SUBMODULES = ("numpy.linalg", "numpy.random", "numpy.fft", "numpy.exceptions", "numpy.dtypes", "collections.abc")


def _warm_numpy() -> None:
    """Run, before the lock, the array methods whose first call imports a numpy module lazily (`a.mean()` loads
    `numpy._core._methods`, printing an array `arrayprint`...): after the lock any import is a violation, so
    an ordinary program calling them would otherwise be stopped."""
    np = sys.modules.get("numpy")
    if np is None:
        return
    a = np.arange(6, dtype=float).reshape(2, 3)
    b = a > 2
    for f in (a.mean, a.std, a.var, a.sum, a.prod, a.min, a.max, a.argmax, a.argmin, a.cumsum, a.round, a.any,
              a.all, a.nonzero, a.tolist, a.copy, a.flatten, b.mean, b.sum, b.any, b.all):
        f()
    a.mean(axis=0), a.std(axis=1), a.astype(int), repr(a), str(a), repr(b), format(a[0, 0], ".2f")
    np.median(a), np.percentile(a, 50), np.quantile(a, 0.5), np.unique(a), np.sort(a), np.argsort(a), np.where(b)
    np.clip(a, 0, 1), np.abs(a), np.sqrt(a), np.exp(-a), np.log1p(a), np.average(a), np.argwhere(b), np.count_nonzero(b)
    np.stack([a, a]), np.concatenate([a, a]), np.linalg.norm(a), np.random.default_rng(0).random(2)


# ----- the protocol ---------------------------------------------------------------------------------------------
def _read(stream) -> Optional[dict]:
    head = stream.read(4)
    if len(head) < 4:
        return None
    (size,) = struct.unpack(">I", head)
    return json.loads(stream.read(size))


def _write(stream, message: dict) -> None:
    data = json.dumps(message, separators=(",", ":"), default=str).encode()
    stream.write(struct.pack(">I", len(data)) + data)
    stream.flush()


# ----- violations -----------------------------------------------------------------------------------------------
def _reporter(fd: int) -> Callable[[str], None]:
    """`violate(what)`: write `{"ok": false, "violation": what}` to the parent on `fd` and exit at once. Everything it
    calls is bound here (builtins and C functions), so a program that rebinds a module's names cannot change it."""
    write, exit_, pack, encode, str_, type_ = os.write, os._exit, struct.pack, encode_basestring_ascii, str, type

    def violate(what: Any) -> None:
        text = what if type_(what) is str_ else "a violation"
        body = (b'{"ok":false,"violation":' + encode(text[:400]).encode("ascii") + b"}")
        try:
            write(fd, pack(">I", len(body)) + body)
        finally:
            exit_(VIOLATION_EXIT)

    return violate


def _describe(event: str, args: tuple) -> str:
    """A violation's words for an audited event (only strings from `args` are used: no program code runs here)."""
    first = args[0] if args and type(args[0]) is str else ""
    if event.startswith("socket."):
        return f"opens a network socket ({event})"
    if event.startswith(("subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.system", "pty.",
                         "os.startfile")):
        return f"starts a process ({event})"
    if event == "import":
        return f"imports {first!r}"
    if event in ("compile", "exec", "code.__new__", "function.__new__"):
        return f"compiles or builds code at run time ({event})"
    if event in ("object.__getattr__", "object.__setattr__", "object.__delattr__"):
        name = args[1] if len(args) > 1 and type(args[1]) is str else "?"
        return f"reaches the interpreter's internals ({event} {name})"
    if event.startswith(("ctypes.", "mmap.")):
        return f"reaches raw memory ({event})"
    if event.startswith(("os.kill", "os.killpg", "signal.")):
        return f"sends a signal ({event})"
    return f"calls {event}"


def _hook(violate: Callable[[str], None], scratch: str, program: types.CodeType,
          reporting: list) -> Callable[[str, tuple], None]:
    """The audit hook (see the module's docstring). Whatever it calls is bound here; it calls no program code."""
    prefix = scratch + "/"
    str_, bytes_, int_, type_ = str, bytes, int, type
    writes_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    describe = _describe

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path = args[0] if args else None
            if type_(path) is bytes_:
                path = path.decode("utf-8", "surrogateescape")
            if type_(path) is not str_:
                violate("opens a file by descriptor or by an object that is no path")
            full = path if path.startswith("/") else prefix + path
            if ".." not in full.split("/") and (full == scratch or full.startswith(prefix)):
                return
            mode = args[1] if len(args) > 1 else None
            flags = args[2] if len(args) > 2 and type_(args[2]) is int_ else 0
            writing = (type_(mode) is str_ and any(c in mode for c in "wax+")) or (mode is None and flags & writes_flags)
            violate(f"{'writes' if writing else 'reads'} {full[:200]} (outside its scratch folder)")
        if event == "exec" and args and args[0] is program:
            return
        if event == "object.__getattr__" and reporting[0]:
            return
        if event == "builtins.id":  # numpy's printing calls id() (a recursion guard); the program has no id() of its
            return  # own (left out of its builtins and refused by every module view)
        violate(describe(event, args))

    return hook


# ----- the program's namespace ----------------------------------------------------------------------------------
def _guards(violate: Callable[[str], None], introspection: frozenset) -> dict[str, Any]:
    """getattr, setattr, delattr, hasattr and type that refuse private names and frame attributes."""
    real_getattr, real_setattr, real_delattr, real_type, str_, type_ = getattr, setattr, delattr, type, str, type

    def check(name: Any) -> str:
        if type_(name) is not str_:
            raise TypeError("attribute name must be a string")
        if name.startswith("_") or name in introspection:
            violate(f"reaches the attribute {name[:60]!r}")
        return name

    def getattr_(obj, name, *default):  # noqa: ANN001
        return real_getattr(obj, check(name), *default)

    def hasattr_(obj, name):  # noqa: ANN001
        return real_getattr(obj, check(name), _MISSING) is not _MISSING

    def setattr_(obj, name, value):  # noqa: ANN001
        real_setattr(obj, check(name), value)

    def delattr_(obj, name):  # noqa: ANN001
        real_delattr(obj, check(name))

    def type_guard(*args):  # noqa: ANN002
        if len(args) == 3:
            names, bases, body = args
            for key in (body if isinstance(body, dict) else ()):
                check(key)
            return real_type(names, bases, body)
        return real_type(*args)

    def attrgetter(*names):  # noqa: ANN002
        for n in names:
            for part in (n.split(".") if type_(n) is str_ else [n]):
                check(part)
        return operator.attrgetter(*names)

    def methodcaller(name, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003
        return operator.methodcaller(check(name), *args, **kwargs)

    def update_wrapper(wrapper, wrapped, assigned=functools.WRAPPER_ASSIGNMENTS,  # noqa: ANN001
                       updated=functools.WRAPPER_UPDATES):
        if tuple(assigned) != functools.WRAPPER_ASSIGNMENTS or tuple(updated) != functools.WRAPPER_UPDATES:
            violate("calls functools.update_wrapper with attributes of its own")
        return functools.update_wrapper(wrapper, wrapped)

    def wraps(wrapped, assigned=functools.WRAPPER_ASSIGNMENTS, updated=functools.WRAPPER_UPDATES):  # noqa: ANN001
        return functools.partial(update_wrapper, wrapped=wrapped, assigned=assigned, updated=updated)

    return {"getattr": getattr_, "hasattr": hasattr_, "setattr": setattr_, "delattr": delattr_, "type": type_guard,
            "operator.attrgetter": attrgetter, "operator.methodcaller": methodcaller,
            "functools.update_wrapper": update_wrapper, "functools.wraps": wraps}


_MISSING = object()


def _views(modules: dict[str, types.ModuleType], violate: Callable[[str], None],
           replaced: dict[str, Any]) -> dict[str, Any]:
    """A read-only view of each module: its public attributes, less other modules (a view of an allowed submodule
    instead) and the builtins in `_DANGEROUS`; `replaced` ("module.name": guarded function) swaps some."""
    views: dict[str, Any] = {}
    dangerous_ids = {id(x) for x in _DANGEROUS}

    links: list[tuple[dict[str, Any], str, str]] = []  # (a view's shown names, key, submodule): filled in below

    for name, module in modules.items():
        shown: dict[str, Any] = {}
        hidden: dict[str, str] = {}
        for key, value in list(vars(module).items()):
            if key.startswith("_"):
                continue
            if isinstance(value, types.ModuleType):
                if value.__name__ in modules and value.__name__ != name:
                    links.append((shown, key, value.__name__))
                else:
                    hidden[key] = f"the module {value.__name__}"
            elif id(value) in dangerous_ids:
                hidden[key] = f"the builtin {key}"
            else:
                shown[key] = replaced.get(f"{name}.{key}", value)
        views[name] = _View(name, module, shown, hidden, violate, dangerous_ids)
    for shown, key, target in links:
        shown[key] = views[target]
    return views


class _View:
    """A module as a program sees it (see `_views`). Attribute access by any name that is not a public, shown
    attribute is refused; reaching a hidden one is a violation. Nothing can be set."""

    __slots__ = ("_name", "_module", "_shown", "_hidden", "_violate", "_dangerous")

    def __init__(self, name: str, module: types.ModuleType, shown: dict[str, Any], hidden: dict[str, str],
                 violate: Callable[[str], None], dangerous: set[int]):
        for key, value in (("_name", name), ("_module", module), ("_shown", shown), ("_hidden", hidden),
                           ("_violate", violate), ("_dangerous", dangerous)):
            object.__setattr__(self, key, value)

    def __getattribute__(self, key: str) -> Any:
        get = object.__getattribute__
        name, shown, hidden, violate = get(self, "_name"), get(self, "_shown"), get(self, "_hidden"), get(self, "_violate")
        if type(key) is not str:
            raise TypeError("attribute name must be a string")
        if key in shown:
            return shown[key]
        if key.startswith("_"):
            violate(f"reaches {name}.{key[:60]}")
        if key in hidden:
            violate(f"reaches {name}.{key} ({hidden[key]}), which a policy may not use")
        value = getattr(get(self, "_module"), key)  # a lazy attribute (numpy's): loading a module is a violation
        if isinstance(value, types.ModuleType) or id(value) in get(self, "_dangerous"):
            violate(f"reaches {name}.{key}, which a policy may not use")
        return value

    def __setattr__(self, key: str, value: Any) -> None:
        object.__getattribute__(self, "_violate")(f"writes {object.__getattribute__(self, '_name')}.{str(key)[:60]}")

    def __delattr__(self, key: str) -> None:
        object.__getattribute__(self, "_violate")(f"deletes {object.__getattribute__(self, '_name')}.{str(key)[:60]}")

    def __repr__(self) -> str:
        return f"<module {object.__getattribute__(self, '_name')!r}>"

    def __dir__(self) -> list[str]:
        return sorted(object.__getattribute__(self, "_shown"))


def _shown_value(value: Any, module_views: dict[str, Any]) -> Any:
    """What the program's namespace holds for one of the API's names: a module becomes its view."""
    if isinstance(value, types.ModuleType):
        return module_views.get(value.__name__, None)
    return value


# ----- errors ---------------------------------------------------------------------------------------------------
def _error_reporter(reporting: list, code_name: str) -> Callable[[BaseException], str]:
    """`Type: message (line N)`: the program's line, read from the traceback while the hook allows it (no program
    code runs then), then the message (which may run the program's code, under the hook again)."""

    def error(exc: BaseException) -> str:
        line = None
        reporting[0] = True
        try:
            tb = exc.__traceback__
            while tb is not None:
                if tb.tb_frame.f_code.co_filename == code_name:
                    line = tb.tb_lineno
                tb = tb.tb_next
        finally:
            reporting[0] = False
        msg = str(exc)
        if len(msg) > 300:
            msg = msg[:297] + "..."
        return f"{type(exc).__name__}: {msg}" + (f" (line {line})" if line else "")

    return error


class _NoApi:
    """The policy API of a sandbox started with none (`process.probe`): no names, no observation."""

    @staticmethod
    def namespace() -> dict[str, Any]:
        return {}

    @staticmethod
    def observation(static: Any, state: Any, agent: int) -> None:
        return None


# ----- the loop -------------------------------------------------------------------------------------------------
def _load_kernel():
    """`agents.sandbox.kernel`, from its file beside this one (the worker runs with `python -I`, outside the project)."""
    spec = importlib.util.spec_from_file_location("societas_sandbox_kernel", os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "kernel.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main() -> None:
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    out_fd = os.dup(1)
    stdout = os.fdopen(out_fd, "wb", buffering=0, closefd=False)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    init = _read(stdin)
    if init is None:
        return
    kernel = _load_kernel()
    guard = init.get("guard", True)
    limits = init.get("limits", {})
    memory = int(limits.get("memory_mb", 512)) * 1024 * 1024
    cpu = int(limits.get("cpu_s", 60))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    scratch = os.path.realpath(init["scratch"])
    os.chdir(scratch)
    os.environ.clear()
    sys.setrecursionlimit(2000)
    for name in [*init.get("allowed", ()), *_SUBMODULES]:
        try:
            __import__(name)
        except ImportError:
            pass
    _warm_numpy()
    if init.get("api"):
        spec = importlib.util.spec_from_file_location("policy_api", init["api"])
        api = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(api)  # type: ignore[union-attr]
        sys.modules["policy_api"] = api
    else:  # (the level probe: no scenario)
        api = _NoApi
    code_name = "<policy>"
    try:
        program = compile(init["code"], code_name, "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        _write(stdout, {"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    applied: dict[str, Any] = {}
    try:
        kernel.die_with_parent()
        if init.get("landlock") == "require" or (init.get("landlock") == "try" and kernel.landlock_abi() > 0):
            applied["landlock"] = kernel.landlock(scratch)
        resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8))  # (before seccomp, which refuses any limit change after it)
        kernel.seccomp()
        applied["seccomp"] = True
    except kernel.KernelLockError as exc:
        _write(stdout, {"ok": False, "unavailable": str(exc)})
        os._exit(UNAVAILABLE_EXIT)

    violate = _reporter(out_fd)
    introspection = frozenset(init.get("introspection", ()))
    guards = _guards(violate, introspection)
    allowed_roots = [n for n in init.get("allowed", ()) if n in sys.modules]
    modules = {n: sys.modules[n] for n in [*allowed_roots, *_SUBMODULES] if n in sys.modules}
    views = _views(modules, violate, guards)

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002, ANN001
        if type(name) is not str or level or name.split(".")[0] not in allowed_roots or name not in views:
            violate(f"imports {str(name)[:60]!r}")
        return views[name] if fromlist else views[name.split(".")[0]]

    safe = {k: getattr(builtins, k) for k in _SAFE_BUILTINS if hasattr(builtins, k)}
    safe.update({k: v for k, v in guards.items() if "." not in k})
    safe["__import__"] = guarded_import
    namespace: dict[str, Any] = {"__builtins__": safe, "__name__": "policy"}
    namespace.update({k: _shown_value(v, views) for k, v in api.namespace().items()})
    reporting = [False]
    error = _error_reporter(reporting, code_name)
    if guard:
        sys.addaudithook(_hook(_reporter(out_fd), scratch, program, reporting))
    else:  # (tests of the kernel's locks alone: the program gets the real builtins and modules, and no hook)
        namespace = {"__builtins__": builtins, "__name__": "policy", **api.namespace()}
    del guards, kernel
    try:
        exec(program, namespace)  # the program's top level: definitions (and whatever else it does)
        entry = namespace.get(init.get("entry", "policy"))
        if not callable(entry):
            raise NameError("the program defines no callable `policy`")
    except MemoryError:
        _write(stdout, {"ok": False, "memory": True, "error": "MemoryError while loading"})
        return
    except BaseException as exc:  # noqa: BLE001 - the program's own failure, reported
        _write(stdout, {"ok": False, "error": error(exc)})
        return
    _write(stdout, {"ok": True, "kernel": applied})
    static: Any = None
    while True:
        message = _read(stdin)
        if message is None:
            return
        if message.get("op") == "reset":
            static = message["static"]
            _write(stdout, {"ok": True})
            continue
        state = message["state"]
        actions: list[Any] = []
        errors: dict[str, str] = {}
        tamper: dict[str, str] = {}
        for k, (agent, seed) in enumerate(zip(message["agents"], message["seeds"])):
            random.seed(seed)
            try:
                obs = api.observation(static, state, agent)
                value = entry(obs)
                if isinstance(value, bool) or not isinstance(value, (int, str)):
                    errors[str(k)] = f"returned {type(value).__name__} {str(value)[:60]!r}, not an action"
                    value = None
                elif isinstance(value, str):
                    value = value[:40]
                actions.append(value)
            except MemoryError:
                _write(stdout, {"memory": True})
                return
            except BaseException as exc:  # noqa: BLE001 - the program's own failure, reported per agent
                actions.append(None)
                field = getattr(exc, "tampered", None)
                if field:
                    tamper[str(k)] = str(field)
                errors[str(k)] = error(exc)
        _write(stdout, {"actions": actions, "errors": errors, "tamper": tamper})


if __name__ == "__main__":
    main()
