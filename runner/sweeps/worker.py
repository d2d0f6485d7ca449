"""One run of a sweep, in whichever worker (the driver, a pool process, a Ray task): never raises."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Optional

from agents.llm.base import LLM
from runner.backends import make_backends
from runner.execution import RunFailed, execute
from runner.plans import FreshRun
from runner.resume import resume_run
from scenarios.registry import get_scenario
from sim.core.errors import RunTaken
from sim.core.spec import RunSpec
from sim.store.store import Store


@dataclass
class Outcome:
    """How one run of a sweep ended: its status (`error` when it could not even run, `taken` when another process
    running the same sweep had it first), why, and how long it took."""

    run_id: str
    status: str
    reason: Optional[str] = None
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "reason": self.reason, "seconds": round(self.seconds, 3)}


_STORES: dict[str, Store] = {}  # one store per URL and worker process


def run_one(url: str, sid: str, run_id: str, mode: str, spec_json: dict[str, Any],
            llm_factory: Optional[Callable[[], LLM]] = None) -> Outcome:
    """Run (`new`) or resume (`resume`) one run of a sweep; failures come back as an Outcome.

    A new run's row gets the sweep's deterministic id and the sweep id. `llm_factory` supplies the
    LLM (a Ray sweep's shared model actor) instead of a model loaded here.
    """
    started = time.perf_counter()
    try:
        store = _STORES.get(url)
        if store is None:
            store = _STORES[url] = Store(url)
        spec = RunSpec.model_validate(spec_json)
        if mode == "resume":
            result = resume_run(store, run_id, llm_factory=llm_factory)
        else:
            backends = make_backends(spec, get_scenario(spec.scenario), store, llm_factory=llm_factory)
            plan = FreshRun(sweep_id=sid, run_id=run_id, drop_if_bad_input=False)
            result = execute(spec, store, plan, backends=backends)
        return Outcome(run_id, result.status, result.reason, time.perf_counter() - started)
    except RunTaken as exc:  # the same sweep runs in another process too, and it got there first
        return Outcome(run_id, "taken", str(exc), time.perf_counter() - started)
    except RunFailed as exc:
        return Outcome(run_id, "failed", exc.reason, time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - e.g. another driver took the run meanwhile
        return Outcome(run_id, "error", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
                       time.perf_counter() - started)
