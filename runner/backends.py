"""The backends a run needs, built once from its spec: the scripted one always, the LLM one when an agent uses it.

Every LLM backend of a run sits behind the store's cache (`agents.llm.cache`). `preflight` checks a
spec's LLM settings (model file, device, chat class) and the sandbox level of a run that executes code an LLM
wrote (`agents.sandbox.levels`) before anything is stored; building the backends checks the level again, so
that replay, resume, fork, rollouts and the environment never run such code under a level that is not there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

from agents.llm.base import LLM
from agents.llm.factory import make_llm_backend
from agents.llm.factory import preflight as llm_preflight
from agents.sandbox.backend import CodeBackend
from agents.sandbox.levels import require as sandbox_level
from agents.scripted import ScriptedBackend
from sim.contracts.backend import Backend, ReplayMode
from sim.core.spec import RunSpec
from sim.store.store import Store
from sim.tick.model import SocietyModel


def make_backends(spec: RunSpec, cls: type[SocietyModel], store: Store, *, replay: Optional[ReplayMode] = None,
                  llm_factory: Optional[Callable[[], LLM]] = None) -> dict[str, Backend]:
    """{"scripted": ..., "llm": ..., "synthesis": ...}: the LLM backend only when some agent of `spec` uses it (or
    runs a program it writes), answered from `store`'s cache first (only from it while `replay` is active); the
    sandbox's code backend when some agent runs a synthesised program."""
    backends: dict[str, Backend] = {"scripted": ScriptedBackend(cls.strategies)}
    if "synthesis" in spec.policies():
        backends["synthesis"] = CodeBackend(isolation=sandbox_level(spec.config.get("sandbox")))
    if spec.uses_llm:
        backends["llm"] = make_llm_backend(spec, store, replay=replay, llm_factory=llm_factory)
    return backends


def preflight(spec: RunSpec) -> None:
    """A model, device or chat class that cannot be used here, or a sandbox level that cannot be had here for a run of
    LLM-written code, is bad input: refused (UsageError) before any write."""
    if "synthesis" in spec.policies():
        sandbox_level(spec.config.get("sandbox"))
    if spec.uses_llm:
        llm_preflight(spec)
