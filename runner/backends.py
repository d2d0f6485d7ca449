"""The backends a run needs, built once from its spec: the scripted one always, the LLM one when an agent uses it.

Every LLM backend of a run sits behind the store's cache (`agents.llm.cache`). `preflight` checks a
spec's LLM settings (model file, device, chat class) and the sandbox level of a run that executes code an LLM
wrote (`agents.sandbox.levels`) before anything is stored; building the backends checks the level again, so
that replay, resume, fork, rollouts and the environment never run such code under a level that is not there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

from pydantic import ValidationError

from agents.llm.base import LLM
from agents.llm.factory import make_llm_backend
from agents.llm.factory import preflight as llm_preflight
from agents.sandbox.backend import CodeBackend
from agents.sandbox.levels import require as sandbox_level
from agents.scripted import ScriptedBackend
from runner.config import bind
from sim.contracts.backend import Backend, ReplayMode
from sim.core.errors import UsageError
from sim.core.spec import LLMSpec, RunSpec, group_llm
from sim.store.store import Store
from sim.tick.model import SocietyModel
from sim.tick.models import RUN_LLM, model_backends, model_holders


def make_backends(spec: RunSpec, cls: type[SocietyModel], store: Store, *, replay: Optional[ReplayMode] = None,
                  llm_factory: Optional[Callable[[], LLM]] = None, per_agent: bool = False) -> dict[str, Backend]:
    """{"scripted": ..., "llm": ..., "synthesis": ...}: the LLM backend only when some agent of `spec` uses it (or
    runs a program it writes), answered from `store`'s cache first (only from it while `replay` is active); the
    sandbox's code backend when some agent runs a synthesised program. `per_agent`: every request its own call
    even where `llm.archetypes` buckets them (probes: a bucket key blind to the probed variable would give every
    level one answer distribution)."""
    backends: dict[str, Backend] = {"scripted": ScriptedBackend(cls.strategies)}
    if "synthesis" in spec.policies():
        backends["synthesis"] = CodeBackend(isolation=sandbox_level(spec.config.get("sandbox")))
    archetype = None if per_agent else cls.archetype
    if spec.uses_llm:
        backends[RUN_LLM] = make_llm_backend(spec, store, replay=replay, llm_factory=llm_factory, archetype=archetype)
        for name, llm in group_models(spec).items():  # (a shared model actor serves the run's llm only)
            backends[name] = make_llm_backend(spec, store, replay=replay, llm=llm, name=name, archetype=archetype)
    return backends


def group_models(spec: RunSpec) -> dict[str, LLMSpec]:
    """`llm:K` -> the LLM its agents play, for each model a population group (or a market side) has of its own
    (sim.tick.models): the group's block over the run's `llm`. UsageError naming the block when it is bad."""
    config = bind(spec).settings
    out: dict[str, LLMSpec] = {}
    for name, block in model_backends(config).items():
        try:
            out[name] = group_llm(spec.llm, block)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise UsageError(f"bad llm block {block}: {'.'.join(map(str, err['loc']))}: {err['msg']}") from None
    return out


def run_models(spec: RunSpec) -> dict[str, LLMSpec]:
    """Every backend of the run that an LLM answers, with its LLM: `llm` (the run's), then each group's own."""
    return {RUN_LLM: spec.llm, **group_models(spec)} if spec.uses_llm else {}


def preflight(spec: RunSpec) -> None:
    """A model, device or chat class that cannot be used here, or a sandbox level that cannot be had here for a run of
    LLM-written code, is bad input: refused (UsageError) before any write."""
    if "synthesis" in spec.policies():
        sandbox_level(spec.config.get("sandbox"))
    if spec.uses_llm:
        for name, llm in run_models(spec).items():
            try:
                llm_preflight(llm)
            except UsageError as exc:
                if name == RUN_LLM:
                    raise
                raise UsageError(f"the llm block of {_holders(spec, name)}: {exc}") from None



def _holders(spec: RunSpec, name: str) -> str:
    """Who plays backend `name`, for messages: "group 2", "customers"..."""
    return " and ".join(model_holders(bind(spec).settings, spec.policy).get(name, [])) or name
