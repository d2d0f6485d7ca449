"""One local model shared by many concurrent runs (a Ray actor per node): their batches share forward passes.

`SharedModel` is an asyncio actor: each run's backend sends its phase batch (`answer`); the
actor collects what arrives within a short window, runs ONE model call over the union
(the local model groups requests by kind and pads them into common forward passes), and
hands every run its own slice. Each request samples from its own seed and, on a CPU in bf16, is computed as in
any batch (docs/architecture.md, "One answer per request"), so a run's result does not depend on which runs it
shared with; on a GPU the rounding of a row may (the lean engine's kernels are not batch-invariant).
`ModelProxy` is the `LLM` a run's backend uses in place of a local model (`shared_llm_factory`
makes one for `make_llm_backend`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Optional

from agents.llm.base import LLM, Answer, Messages
from agents.llm.local.llm import LocalLLM, local_sampling, model_id_for
from sim.core.spec import LLMSpec

#: the checkout this package runs from: Ray workers import it from there
ROOT = Path(__file__).resolve().parents[2]

NAMESPACE = "societas"


class SharedModel:
    """The actor's class (wrapped with `ray.remote` by `model_actor`)."""

    def __init__(self, model: Optional[str], device: Optional[str], dtype: Optional[str], temperature: float,
                 window_s: float = 0.02, max_batch: int = 256, threads: Optional[int] = None,
                 batch_tokens: Optional[int] = None) -> None:
        self.llm = LocalLLM(model, device, dtype, temperature, max_batch=max_batch, threads=threads,
                            batch_tokens=batch_tokens)
        self.window_s = window_s
        self.queue: list[tuple[Sequence[Any], Sequence[Any], asyncio.Future]] = []
        self.busy = False
        self.counts = {"calls": 0, "requests": 0, "passes": 0, "max_requests_per_pass": 0, "max_calls_per_pass": 0}

    async def answer(self, requests: Sequence[Any], messages: Sequence[Any]) -> list[Any]:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self.queue.append((requests, messages, future))
        self.counts["calls"] += 1
        self.counts["requests"] += len(requests)
        if not self.busy:
            self.busy = True
            loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self.queue:
                await asyncio.sleep(self.window_s)  # let the other runs' batches of this phase arrive
                batch, self.queue = self.queue, []
                requests = [r for b in batch for r in b[0]]
                messages = [m for b in batch for m in b[1]]
                try:
                    answers = await loop.run_in_executor(None, self.llm.answer, requests, messages)
                except Exception as exc:  # noqa: BLE001 - every waiting run gets the error
                    for *_, future in batch:
                        future.set_exception(exc)
                    continue
                c = self.counts
                c["passes"] += 1
                c["max_requests_per_pass"] = max(c["max_requests_per_pass"], len(requests))
                c["max_calls_per_pass"] = max(c["max_calls_per_pass"], len(batch))
                start = 0
                for reqs, _, future in batch:
                    future.set_result(answers[start:start + len(reqs)])
                    start += len(reqs)
        finally:
            self.busy = False

    async def stats(self) -> dict[str, int]:
        return dict(self.counts)


class ModelProxy:
    """An `LLM` that sends each batch to the shared model actor."""

    def __init__(self, handle: Any, model_id: str, sampling: dict[str, Any]) -> None:
        self.handle, self.model_id, self.sampling = handle, model_id, sampling

    def answer(self, requests: Sequence[Any], messages: Sequence[Messages]) -> list[Answer]:
        import ray

        return ray.get(self.handle.answer.remote(list(requests), list(messages)))


def actor_name(llm: Any, node_id: str) -> str:
    key = hashlib.sha256(json.dumps([llm.model, llm.device, llm.dtype, llm.temperature]).encode()).hexdigest()[:10]
    return f"llm-{key}-{node_id[:16]}"


def start_model_actors(llm: Any, window_s: float = 0.02) -> list[Any]:
    """One actor per alive node (its GPU when it has one), created by the driver so they outlive any task."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    actors = []
    for node in ray.nodes():
        if not node.get("Alive"):
            continue
        gpus = 1 if node.get("Resources", {}).get("GPU", 0) >= 1 else 0
        cls = ray.remote(num_cpus=0, num_gpus=gpus, max_concurrency=1000)(SharedModel)
        actors.append(cls.options(name=actor_name(llm, node["NodeID"]), namespace=NAMESPACE, get_if_exists=True,
                                  scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))
                      .remote(llm.model, llm.device, llm.dtype, llm.temperature, window_s, threads=llm.threads,
                              batch_tokens=llm.batch_tokens))
    return actors


def shared_llm_factory(llm: LLMSpec) -> Callable[[], LLM]:
    """Inside a Ray task: an `llm_factory` for `make_llm_backend` whose LLM is the model actor of this node
    (any node's if this one has none), found when the run first needs the model."""

    def connect() -> LLM:
        import ray

        node = ray.get_runtime_context().get_node_id()
        try:
            handle = ray.get_actor(actor_name(llm, node), namespace=NAMESPACE)
        except ValueError:
            names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True)
                     if a.get("namespace") == NAMESPACE and a["name"].startswith(actor_name(llm, "")[:15])]
            if not names:
                raise RuntimeError("no shared model actor is running") from None
            handle = ray.get_actor(names[0], namespace=NAMESPACE)
        return ModelProxy(handle, model_id_for(llm.model), local_sampling(llm.temperature))

    return connect


def init_ray(address: Optional[str], workers: Optional[int]) -> bool:
    """Connect to `address` or start a local instance (`workers` CPUs, a small object store, this checkout on the
    workers' path); returns whether this call started the connection. Sweeps and the inference pool start Ray here."""
    import ray

    if ray.is_initialized():
        return False
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    # no address: a new local instance ("local"), never one that RAY_ADDRESS or an earlier `ray start` names, as
    # ray.init(address=None) would join (and then refuse num_cpus); a cluster is named with --address
    kwargs: dict[str, Any] = {"address": address or "local", "runtime_env": {"env_vars": {"PYTHONPATH": path}},
                              "include_dashboard": False, "logging_level": "ERROR", "log_to_driver": False}
    if address is None:  # a local instance sized for this sweep, small object store
        kwargs.update(num_cpus=workers or os.cpu_count() or 1, object_store_memory=256 * 1024**2)
    ray.init(**kwargs)
    return True
