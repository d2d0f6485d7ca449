"""The sandbox's isolation levels: what each guarantees, and refusing a run whose level cannot be had here.

Code an LLM wrote runs only under a level the run names (the grid games' `sandbox` field, default
`bubblewrap`), and the run stores that name. Where the named level is not available, a run is refused before
anything is stored (`require`: a UsageError, exit 2) with what to install or which weaker level to name. No
level is ever swapped for a weaker one silently.

What each level guarantees against a program that gets past every Python-level guard (the worker's audit
hook, module views and guarded builtins are defence in depth at every level, never the wall):
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from agents.sandbox.process import DEFAULT_LEVEL, LEVELS, probe
from sim.core.errors import UsageError
from sim.core.spec import policies_used

#: level -> its guarantees, in one line each (the README's table says the same)
GUARANTEES: dict[str, str] = {
    "bubblewrap": "full: the program's file system holds only the Python installation (read-only) and its scratch "
                  "folder; no network; its own PID, IPC and user namespaces; no process, thread, exec, socket or "
                  "signal to others (seccomp); memory, CPU and file-size limits",
    "landlock": "weaker (no namespaces): the kernel (Landlock) lets it open, create or remove files only in its "
                "scratch folder, though it can learn that other paths exist (stat); no process, thread, exec, socket "
                "or signal to others (seccomp); memory, CPU and file-size limits",
    "process": "weakest: no process, thread, exec, socket or signal to others (seccomp); memory, CPU and file-size "
               "limits; files are guarded only by the in-process guard: a program that gets past it can read and write "
               "what your account can",
}
#: what a stored run of LLM-written code that names no level ran under (it predates recorded levels)
UNRECORDED = "unrecorded"
GUARANTEES_OF_UNRECORDED = ("not recorded: the run predates recorded levels and may have run under a weaker "
                            "fallback (a network namespace only)")
#: how to get bubblewrap, by package manager
INSTALL = "apt-get install bubblewrap (dnf/yum/pacman/zypper/apk: package bubblewrap)"
FIELD = "sandbox"


def weaker_usable() -> list[str]:
    """The weaker levels this machine can give now, strongest first."""
    return [name for name in LEVELS if name != DEFAULT_LEVEL and probe(name) is None]


def require(level: Optional[str]) -> str:
    """The level a run of LLM-written code gets (`level`, default bubblewrap) if it can be had here, else a
    UsageError saying what to install or which weaker level to name."""
    name = level or DEFAULT_LEVEL
    why = probe(name)
    if why is None:
        return name
    if name == DEFAULT_LEVEL:
        usable = weaker_usable()
        also = (f"; or name a weaker sandbox: {' or '.join(f'--set {FIELD}={n}' for n in usable)} "
                f"(what each guarantees: README, Sandbox)") if usable else ""
        fix = ("; install it: " + INSTALL if "not installed" in why else
               "; allow unprivileged user namespaces (or install a setuid bwrap)" if "cannot start" in why else "")
        raise UsageError(f"--policy synthesis runs code an LLM wrote inside bubblewrap, which is unusable here: {why}"
                         f"{fix}{also}")
    raise UsageError(f"the sandbox level {name!r} cannot be had here: {why}; install bubblewrap for the full sandbox "
                     f"({INSTALL})")


def hint() -> Optional[str]:
    """One line for `make bootstrap`: None when the full sandbox works here, else how to get it."""
    why = probe(DEFAULT_LEVEL)
    if why is None:
        return None
    return (f"note: the full sandbox for --policy synthesis needs bubblewrap ({why}): {INSTALL}. Without it, such "
            f"runs are refused unless you name a weaker level (--set {FIELD}=landlock or {FIELD}=process; README, Sandbox).")


def of_run(spec: Mapping[str, Any]) -> Optional[tuple[str, str]]:
    """(level, what it guarantees) of a stored run's spec that ran LLM-written code; None for a run that ran none."""
    config = spec.get("config") or {}
    if "synthesis" not in policies_used(config.get("population"), spec.get("policy") or "scripted"):
        return None
    level = config.get(FIELD)
    if level not in GUARANTEES:
        return UNRECORDED, GUARANTEES_OF_UNRECORDED
    return level, GUARANTEES[level]
