"""Objects named by reference: `package.module:NAME` or `path/to/file.py:NAME`.

User-defined scenarios, scripted strategies and prompt templates live in the user's own module
or file; a RunSpec stores the reference (a file path made absolute) so that any later process
(replay, resume, fork, show, the app) imports the same object again. Every failure is a one-line
`UsageError` naming what was written and what is wrong.

`only_references(permitted)` limits, for the code running inside it (a context: one thread, one app session),
which references may be imported at all: the app serves visitors, and a reference typed into one of its
pages is code it would run; only those the user's own runs already used pass unless the app was started
with `--allow-code`. Every import by reference (scenarios, strategies, templates, chat model classes) asks
`check_permitted` first.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Optional

from sim.core.errors import UsageError

__all__ = ["is_reference", "is_path", "absolute", "load_object", "load_strategy", "import_file", "import_module",
           "one_line", "only_references", "check_permitted", "references_in"]

#: the keys under which a spec, config, YAML run config or sweep file names code: a scenario, a chat model class,
#: a prompt template, a scripted strategy (also as the last part of a sweep grid's dotted key: `llm.cls`)
REFERENCE_KEYS = frozenset({"scenario", "cls", "template", "strategy"})

#: the references the current context may import (None: any); see `only_references`
_PERMITTED: ContextVar[Optional[Callable[[str], bool]]] = ContextVar("societas_permitted_references", default=None)

_FILE_MODULES_BY_NAME: dict[str, str] = {}  # synthetic module name -> absolute file path
_BY_PATH: dict[str, Any] = {}  # absolute file path -> the module loaded from it


def is_reference(ref: Any) -> bool:
    """Whether `ref` is a `module:NAME` or `path/to/file.py:NAME` reference (not a plain registered name)."""
    return isinstance(ref, str) and ":" in ref


def is_path(target: str) -> bool:
    """Whether the part before ':' names a file rather than a module."""
    return target.endswith(".py") or "/" in target or os.sep in target


def absolute(ref: str, base: Optional[Path] = None) -> str:
    """`ref` with its file path made absolute (relative to `base`, else the current directory); modules unchanged."""
    target, _, name = ref.rpartition(":")
    if not target or not is_path(target):
        return ref
    path = Path(target).expanduser()
    if not path.is_absolute():
        path = (base or Path.cwd()) / path
    return f"{os.path.abspath(path)}:{name}"


@contextmanager
def only_references(permitted: Optional[Callable[[str], bool]]) -> Iterator[None]:
    """Inside: a reference is imported only if `permitted(ref)` (None: any, as outside)."""
    token = _PERMITTED.set(permitted)
    try:
        yield
    finally:
        _PERMITTED.reset(token)


def check_permitted(ref: str, noun: str) -> None:
    """UsageError when the current context may not import `ref` (see `only_references`)."""
    permitted = _PERMITTED.get()
    if permitted is not None and not permitted(ref):
        raise UsageError(f"{noun} {ref!r} is code this app may not import: only references its store's runs "
                         "already used, unless the app is started with --allow-code")


def references_in(data: Any) -> set[str]:
    """Every code reference `data` names under `REFERENCE_KEYS`, at any depth (a population's strategies, a sweep
    grid's list of values), as written."""
    found: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k).rpartition(".")[2])
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v, key)
        elif key in REFERENCE_KEYS and is_reference(value):
            found.add(value)

    walk(data)
    return found


def load_object(ref: str, noun: str, shown: Optional[str] = None) -> tuple[Any, Any]:
    """(module, object) that `ref` names; errors say `noun` ("scenario", "strategy", ...) and quote `shown`."""
    check_permitted(ref, noun)
    shown = shown or ref
    target, _, name = ref.rpartition(":")
    if not target or not name:
        raise UsageError(f"bad {noun} reference {shown!r}: expected module:NAME or path/to/file.py:NAME")
    given = shown.rpartition(":")[0]
    module = import_file(target, given, noun) if is_path(target) else import_module(target, noun)
    obj: Any = module
    for part in name.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return module, None
    return module, obj


def one_line(exc: BaseException) -> str:
    """An exception as one short line."""
    if isinstance(exc, SyntaxError):
        return f"SyntaxError: {exc.msg} (line {exc.lineno})"
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:200]}"


def file_of_module(name: str) -> Optional[str]:
    """The absolute file a module imported by `import_file` came from (None for ordinary modules)."""
    return _FILE_MODULES_BY_NAME.get(name)


def import_file(target: str, given: str = "", noun: str = "scenario") -> Any:
    """The module of the Python file `target` (imported once per path; the file may import its neighbours)."""
    path = Path(target).expanduser()
    shown = repr(given or target)
    if not path.exists():
        raise UsageError(f"{noun} file {shown} does not exist")
    if not path.is_file() or path.suffix != ".py":
        raise UsageError(f"{noun} file {shown} is not a .py file")
    path = Path(os.path.abspath(path))
    loaded = _BY_PATH.get(str(path)) or _loaded_from(path)
    if loaded is not None:  # imported already (e.g. `import my_scenario` in a script): the same objects
        return loaded
    mod_name = "societas_user_" + path.stem.replace("-", "_") + "_" + hashlib.sha1(str(path).encode()).hexdigest()[:8]
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {noun} file {shown}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    _FILE_MODULES_BY_NAME[mod_name] = str(path)
    _BY_PATH[str(path)] = module
    folder = str(path.parent)
    added = folder not in sys.path
    if added:  # the file may import its neighbours
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's code: any failure is bad input, said in one line
        sys.modules.pop(mod_name, None)
        _FILE_MODULES_BY_NAME.pop(mod_name, None)
        _BY_PATH.pop(str(path), None)
        raise UsageError(f"cannot import {noun} file {shown}: {one_line(exc)}") from None
    finally:
        if added and folder in sys.path:
            sys.path.remove(folder)
    return module


def _loaded_from(path: Path) -> Any:
    """A module already imported from the file `path`, if any."""
    wanted = str(path)
    for name, module in list(sys.modules.items()):
        source = getattr(module, "__file__", None)
        if source and name != "__main__" and source.endswith(".py") and os.path.abspath(source) == wanted:
            return module
    return None


def import_module(target: str, noun: str = "scenario") -> Any:
    """`importlib.import_module(target)`, modules in the current directory included (as `python -m`)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.append(cwd)
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name and (target == exc.name or target.startswith(exc.name + ".")):
            raise UsageError(f"cannot import {noun} module {target!r}: no module named {exc.name!r}") from None
        raise UsageError(f"cannot import {noun} module {target!r}: {one_line(exc)}") from None
    except Exception as exc:  # noqa: BLE001
        raise UsageError(f"cannot import {noun} module {target!r}: {one_line(exc)}") from None


def load_strategy(ref: str, shown: Optional[str] = None) -> Callable[..., Any]:
    """The scripted strategy `(request, rng) -> value` that `module:function` / `path/to/file.py:function` names.

    One-line UsageError for a missing file, module or function, an import error, or an object that is
    not a function.
    """
    shown = shown or ref
    module, obj = load_object(ref, "strategy", shown)
    if obj is None:
        found = sorted(n for n, v in vars(module).items()
                       if callable(v) and not isinstance(v, type) and not n.startswith("_")
                       and getattr(v, "__module__", None) == module.__name__)
        raise UsageError(f"{shown.rpartition(':')[0]} has no function {ref.rpartition(':')[2]!r}; functions there: "
                         f"{', '.join(found) or 'none'}")
    if isinstance(obj, type) or not callable(obj):
        raise UsageError(f"strategy {shown} is not a function (request, rng) -> value (it is a "
                         f"{'class' if isinstance(obj, type) else type(obj).__name__})")
    return obj
