"""The sandbox's child process: runs one program an LLM wrote, one step at a time, and nothing else.

Started by `agents.sandbox.process.Sandbox` as `python -I worker.py` (inside bubblewrap or a new network
namespace where the machine allows it). It talks over its stdin and stdout only (length-prefixed JSON),
so what the program prints goes nowhere. Before the program's first line runs, the worker:

1. sets its resource limits: address space (memory), CPU seconds, file size, open files, no core dumps;
2. moves into its scratch folder, empties its environment, imports numpy, the scenario's policy API and
   the allowed modules (`checks.ALLOWED_IMPORTS`), and compiles the program;
3. locks itself: an audit hook (PEP 578) that from then on refuses every import that would load a module,
   every compile (eval/exec of text), every file opened outside the scratch folder, every socket,
   process, signal, `ctypes`, `mmap`, `marshal`/`pickle` load, audit-hook and resource-limit change. A
   refused event raises `SandboxViolation` (a BaseException: `except Exception` in the program cannot
   swallow it) and is remembered even if a bare `except:` swallows it: the parent stops the program.

The program runs with a builtins table without open/eval/exec/compile/getattr..., an `__import__` that
hands out only the pre-imported allowed modules, and the API's names (helpers, constants). Each agent's
`policy(obs)` call gets an observation the API builds; its answer must be an int or a string (the parent
checks it against the action space).

This file imports only the standard library at module level: it runs outside the project.
"""

from __future__ import annotations

import builtins
import importlib.util
import json
import os
import random
import resource
import struct
import sys
import traceback
from typing import Any, Optional

_BLOCKED_PREFIXES = ("socket.", "subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
                     "os.system", "os.kill", "os.killpg", "os.remove", "os.unlink", "os.rename", "os.rmdir",
                     "os.mkdir", "os.chmod", "os.chown", "os.link", "os.symlink", "os.truncate", "os.utime",
                     "os.listdir", "os.scandir", "os.chdir", "os.putenv", "os.unsetenv", "os.setxattr",
                     "os.removexattr", "shutil.", "ctypes.", "mmap.", "marshal.load", "pickle.find_class",
                     "glob.", "pty.", "fcntl.", "resource.setrlimit", "resource.prlimit", "sys.addaudithook",
                     "sys.setprofile", "sys.settrace", "sys._getframe", "sys._current_frames", "code.__new__",
                     "function.__new__", "import", "compile", "cpython.", "setopencode", "builtins.input",
                     "builtins.breakpoint", "signal.", "webbrowser.", "urllib.", "http.", "ftplib.", "smtplib.",
                     "telnetlib.", "imaplib.", "poplib.", "nntplib.", "msvcrt.", "winreg.", "_winapi.", "os.startfile",
                     "sqlite3.", "socketserver.", "select.", "ssl.", "tempfile.", "zipimport.", "gc.get_referrers",
                     "gc.get_referents", "gc.get_objects", "object.__delattr__")
_SAFE_BUILTINS = ("abs", "all", "any", "ascii", "bin", "bool", "bytearray", "bytes", "callable", "chr", "complex",
                  "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset", "hasattr", "hash", "hex",
                  "id", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next",
                  "object", "oct", "ord", "pow", "print", "range", "repr", "reversed", "round", "set", "slice",
                  "sorted", "str", "sum", "tuple", "zip", "True", "False", "None", "Exception", "ValueError",
                  "TypeError", "KeyError", "IndexError", "ZeroDivisionError", "ArithmeticError", "LookupError",
                  "RuntimeError", "StopIteration", "AttributeError", "NotImplementedError", "AssertionError",
                  "OverflowError", "NotImplemented", "Ellipsis", "staticmethod", "classmethod", "property", "super",
                  "type", "BaseException", "MemoryError", "RecursionError", "getattr", "setattr", "delattr",
                  # (the audit hook decides what these may do: files in the scratch folder only, no compiling)
                  "open", "eval", "exec", "compile")


class SandboxViolation(BaseException):
    """The program tried something the sandbox refuses (a BaseException, so `except Exception` does not catch it)."""


_state: dict[str, Any] = {"locked": False, "scratch": "", "violation": None}


def _audit(event: str, args: tuple) -> None:
    if not _state["locked"]:
        return
    if event == "open":
        path, mode = args[0], args[1] if len(args) > 1 else "r"
        if isinstance(path, int):
            raise _violate(f"opens file descriptor {path}")
        real = os.path.realpath(os.fsdecode(path)) if isinstance(path, (str, bytes)) else str(path)
        scratch = _state["scratch"]
        if scratch and (real == scratch or real.startswith(scratch + os.sep)):
            return
        action = "reads" if (mode in (None, "r", "rb") or (isinstance(mode, str) and not set(mode) & set("wax+"))) else "writes"
        raise _violate(f"{action} {real!s} (outside its scratch folder)")
    if event.startswith(_BLOCKED_PREFIXES):
        raise _violate(_describe(event, args))


def _describe(event: str, args: tuple) -> str:
    if event.startswith("socket."):
        return f"opens a network socket ({event})"
    if event.startswith(("subprocess.", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.system", "pty.")):
        return f"starts a process ({event})"
    if event == "import":
        return f"imports {args[0]!r}"
    if event == "compile":
        return "compiles code at run time (eval/exec/compile)"
    return f"calls {event}"


def _violate(what: str) -> SandboxViolation:
    if _state["violation"] is None:
        _state["violation"] = what
    return SandboxViolation(what)


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


def _error(exc: BaseException, code_name: str) -> str:
    """`Type: message (line N)`: the program's line, read without opening any file."""
    line = None
    for frame, lineno in traceback.walk_tb(exc.__traceback__):  # (no source lines: reading them opens files)
        if frame.f_code.co_filename == code_name:
            line = lineno
    msg = str(exc)
    if len(msg) > 300:
        msg = msg[:297] + "..."
    return f"{type(exc).__name__}: {msg}" + (f" (line {line})" if line else "")


def main() -> None:
    stdin = os.fdopen(os.dup(0), "rb", buffering=0)
    stdout = os.fdopen(os.dup(1), "wb", buffering=0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    init = _read(stdin)
    if init is None:
        return
    limits = init.get("limits", {})
    memory = int(limits.get("memory_mb", 512)) * 1024 * 1024
    cpu = int(limits.get("cpu_s", 60))
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    scratch = os.path.realpath(init["scratch"])
    os.chdir(scratch)
    _state["scratch"] = scratch
    os.environ.clear()
    sys.setrecursionlimit(2000)
    for name in init.get("allowed", ()):
        try:
            __import__(name)
        except ImportError:
            pass
    spec = importlib.util.spec_from_file_location("policy_api", init["api"])
    api = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(api)  # type: ignore[union-attr]
    sys.modules["policy_api"] = api
    allowed = {name: sys.modules[name] for name in init.get("allowed", ()) if name in sys.modules}
    code_name = "<policy>"
    try:
        program = compile(init["code"], code_name, "exec")
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        _write(stdout, {"ok": False, "error": _error(exc, code_name)})
        return
    resource.setrlimit(resource.RLIMIT_NOFILE, (8, 8))

    def guarded_import(name, globals=None, locals=None, fromlist=(), level=0):  # noqa: A002
        root = name.split(".")[0]
        if level or root not in allowed:
            raise _violate(f"imports {name!r}")
        return allowed[root] if not fromlist else sys.modules.get(name, allowed[root])

    safe = {k: getattr(builtins, k) for k in _SAFE_BUILTINS if hasattr(builtins, k)}
    safe["__import__"] = guarded_import
    namespace: dict[str, Any] = {"__builtins__": safe, "__name__": "policy"}
    namespace.update(api.namespace())
    sys.addaudithook(_audit)
    _state["locked"] = True
    try:
        exec(program, namespace)  # the program's top level: definitions (and whatever else it does)
        entry = namespace.get(init.get("entry", "policy"))
        if not callable(entry):
            raise NameError("the program defines no callable `policy`")
    except SandboxViolation as exc:
        _write(stdout, {"ok": False, "violation": str(exc)})
        return
    except MemoryError:
        _write(stdout, {"ok": False, "memory": True, "error": "MemoryError while loading"})
        return
    except BaseException as exc:  # noqa: BLE001 - the program's own failure, reported
        _write(stdout, {"ok": False, "error": _error(exc, code_name)})
        return
    _write(stdout, {"ok": True})
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
            except SandboxViolation:
                actions.append(None)
                break
            except MemoryError:
                _write(stdout, {"memory": True})
                return
            except RecursionError as exc:
                actions.append(None)
                errors[str(k)] = _error(exc, code_name)
            except BaseException as exc:  # noqa: BLE001 - the program's own failure, reported per agent
                actions.append(None)
                field = getattr(exc, "tampered", None)
                if field:
                    tamper[str(k)] = str(field)
                errors[str(k)] = _error(exc, code_name)
            if _state["violation"] is not None:
                break
        reply = {"actions": actions, "errors": errors, "tamper": tamper}
        if _state["violation"] is not None:
            reply["violation"] = _state["violation"]
            _write(stdout, reply)
            return
        _write(stdout, reply)


if __name__ == "__main__":
    main()
