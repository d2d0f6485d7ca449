"""The Ray executor of sweeps: one task per run on a Ray cluster (or a local Ray instance), one store.

Workers import this package from the driver's checkout (PYTHONPATH is passed in the job's
runtime env; on a remote cluster install societas on every node). Runs whose agents use the
embedded/local model share one model actor per node (agents.llm.shared): their batches are
merged into common forward passes. LangChain-served models need no actor (the server batches).
"""

from __future__ import annotations

import socket
import warnings
from collections.abc import Callable
from typing import Any, Optional

from agents.llm.shared import init_ray, shared_llm_factory, start_model_actors
from runner.sweeps.backlog import SweepBacklog
from runner.sweeps.worker import Outcome, run_one
from sim.core.errors import UsageError
from sim.core.spec import LLMSpec, RunSpec



def _task(url: str, sid: str, run_id: str, mode: str, spec: dict[str, Any], shared: bool) -> Outcome:
    factory = shared_llm_factory(RunSpec.model_validate(spec).llm) if shared else None
    return run_one(url, sid, run_id, mode, spec, llm_factory=factory)


def local_model_llm(backlog: SweepBacklog) -> Optional[LLMSpec]:
    """The LLM spec to serve from a shared actor: when some run needs the local model (one spec per sweep)."""
    for _, _, s in backlog.todo:
        spec = RunSpec.model_validate(s)
        if spec.llm.provider == "local" and spec.uses_llm:
            return spec.llm
    return None


#: seconds `check_address` waits for a Ray cluster to answer
CONNECT_TIMEOUT_S = 10.0


def check_address(address: str, timeout_s: float = CONNECT_TIMEOUT_S) -> None:
    """Refuse, before a sweep stores anything, a Ray address that cannot work: not `host:port` or
    `ray://host:port`, or nobody answering there within `timeout_s` (ray.init would retry for minutes)."""
    if address in ("auto", "local"):
        return
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"bad value for '--address': {address!r}; expected ray://host:port (a Ray client server, "
                         "default port 10001) or host:port (a cluster's head node, default port 6379)")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise UsageError(f"cannot reach a Ray cluster at {address!r} within {timeout_s:g}s: "
                         f"{exc.strerror or type(exc).__name__}") from None


def connect(address: Optional[str], workers: Optional[int]) -> bool:
    """`init_ray`, with a cluster that cannot be reached, or used from here, as one UsageError (the sweep
    calls this before it stores anything). Returns whether this call started the connection."""
    if address is not None:
        check_address(address)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return init_ray(address, workers)
    except Exception as exc:  # noqa: BLE001 - whatever Ray raises, this cluster cannot run the sweep
        text = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise UsageError(f"cannot connect to Ray{' at ' + repr(address) if address else ''}: {text}") from None


def run_on_ray(backlog: SweepBacklog, *, address: Optional[str], workers: Optional[int],
               on_done: Callable[[Outcome], None], batch_window_s: float = 0.02) -> dict[str, Any]:
    """Submit every run as a Ray task (at most `workers` in flight, default: the cluster's CPUs); returns actor stats."""
    import ray

    started = init_ray(address, workers)
    stats: dict[str, Any] = {}
    inflight: dict[Any, str] = {}
    try:
        llm = local_model_llm(backlog)
        actors = []
        if llm is not None:
            actors = start_model_actors(llm, batch_window_s)
        task = ray.remote(num_cpus=1, max_retries=0)(_task)
        window = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        queue = list(backlog.todo)
        while queue or inflight:
            while queue and len(inflight) < window:
                rid, mode, spec = queue.pop(0)
                inflight[task.remote(backlog.url, backlog.sweep_id, rid, mode, spec, llm is not None)] = rid
            ready, _ = ray.wait(list(inflight), num_returns=1)
            for ref in ready:
                rid = inflight.pop(ref)
                try:
                    outcome = ray.get(ref)
                except Exception as exc:  # noqa: BLE001 - a worker died: the run stays resumable
                    outcome = Outcome(rid, "error", f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
                on_done(outcome)
        if actors:
            stats = {"model_actors": [ray.get(a.stats.remote()) for a in actors]}
            for a in actors:
                ray.kill(a)
    except KeyboardInterrupt:
        for ref in inflight:
            ray.cancel(ref, force=True)
        raise
    finally:
        if started:
            ray.shutdown()
    return stats
