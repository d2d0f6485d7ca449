"""An inference pool: N replicas of the local engine as Ray actors, one run's batches split across them.

`PoolLLM` is the `LLM` a run's backend uses when `llm.replicas` is set. A batch is cut into shards
(`agents.llm.sharding.shards`): prefix groups as the engine makes them, chunked to `SHARD_ROWS`
requests, small groups packed together up to that cap: a function of the prompts alone. Every shard is
one engine call, sent as its own actor task; a replica has one shard in flight at a time and, when it
returns, takes the next (its own planned shards, a prefix group's kept together, then the pending
shards of the replica with the most work left: `sharding.Dispatch`), so a replica that finishes early
helps a slow one. The answers come back in request order.

The same seeds give the same answers whatever N is, by construction: the engine sees the same
calls (the shards) whatever N is, and every request samples from its own seed. Calls made one by one
were needed before decision contract 9, when the engine's answers depended on what else was in a call
(measured on a 64-member social tick: of 32 Text requests answered in one call or in two, 11 differed; a
Choice's log-probability moved by up to 1.1); on a CPU in bf16 they no longer do (docs/architecture.md, "One
answer per request"), in float32 and on GPUs they still may, so the shards stay one call each. A CPU replica
runs one torch thread unless `llm.threads` says otherwise (the thread count never follows N). A
replica runs on one GPU where the cluster has GPUs.

A replica whose process dies is restarted by Ray and its shard in flight sent again (`RESTARTS` times at
most); it answers the same on the new process, so the run finishes as if nothing happened.

On a shared machine each login session's processes are scheduled as one group (Linux's autogroup), and a
local Ray instance's replicas all sit in the session that started it: while other sessions keep the cores
busy, N replicas together get that session's share of the machine, not N times it (measured: benchmarks/pool.py).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from agents.llm.base import LLM, Answer, Messages
from agents.llm.local.layout import LayoutRules
from agents.llm.local.llm import LocalLLM, local_sampling, model_id_for
from agents.llm.shared import init_ray
from agents.llm.sharding import Dispatch, assign, shard_cost, shards
from sim.contracts.backend import BackendUnavailable
from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from sim.core.spec import LLMSpec

#: requests per shard (one engine call): small enough to spread a 64-agent tick over 4 replicas, large enough that
#: the prefix every shard forwards again (the system text) stays a small part of a shard's work
SHARD_ROWS = 16
#: the prompts' characters are grouped as the engine groups tokens: ~4 characters a token
SHARD_RULES = LayoutRules(batch_tokens=1 << 62, max_batch=SHARD_ROWS, min_shared_prefix=64, split_cost=192)
#: on GPUs a call's fixed cost is larger (1,000 Number decisions in 0.11 s on an H200, one in 0.03 s): shards of 1,024
GPU_SHARD_RULES = LayoutRules(batch_tokens=1 << 62, max_batch=1024, min_shared_prefix=64, split_cost=192)
#: restarts of a dead replica (and resends of each of its shards) before the pool gives up on a batch
RESTARTS = 4


class Replica:
    """One engine replica (the actor's class, wrapped with `ray.remote` by `PoolLLM`): each shard it is sent is one
    engine call."""

    def __init__(self, model: Optional[str], device: Optional[str], dtype: Optional[str], temperature: float,
                 threads: Optional[int], batch_tokens: Optional[int]) -> None:
        self.llm = LocalLLM(model, device, dtype, temperature, threads=threads, batch_tokens=batch_tokens)
        self.requests = 0
        self.tokens_in = 0

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        """One shard of a batch: one engine call."""
        got = self.llm.answer(requests, messages)
        self.requests += len(requests)
        self.tokens_in += sum(a.tokens_in for a in got)
        return got

    def stats(self) -> dict[str, Any]:
        """This process's pid and CPU seconds, the requests and prompt tokens it answered, and the engine's forward
        counters."""
        counters = dict(self.llm.lm.counters) if self.requests else {}  # (never loads a model to say so)
        return {"pid": os.getpid(), "cpu_s": time.process_time(), "requests": self.requests, "tokens_in": self.tokens_in,
                **counters}

    def pid(self) -> int:
        """The process the replica runs in (the tests kill it)."""
        return os.getpid()


def placement(llm: LLMSpec, replicas: int) -> dict[str, Any]:
    """How each replica is placed: one GPU where the cluster has GPUs (and the spec does not ask for a CPU), else one
    CPU. A UsageError when the cluster cannot hold `replicas` of them (Ray would wait for ever)."""
    import ray

    have = ray.cluster_resources()
    gpus = int(have.get("GPU", 0))
    if gpus and llm.device != "cpu":
        if gpus < replicas:
            raise UsageError(f"bad value for 'llm.replicas': {replicas}; the Ray cluster has {gpus} GPUs (one replica each)")
        return {"num_gpus": 1, "num_cpus": 1}
    cpus = int(have.get("CPU", 0))
    if cpus < replicas:
        raise UsageError(f"bad value for 'llm.replicas': {replicas}; the Ray cluster has {cpus} CPUs (one replica each)")
    return {"num_cpus": 1}


@dataclass
class Flight:
    """One batch on its way through the pool: its shards, those still to send, and those each replica is answering."""

    requests: Sequence[DecisionRequest]
    messages: Sequence[Messages]
    parts: list[list[int]]
    plan: Dispatch
    running: dict[Any, tuple[int, int]] = field(default_factory=dict)  # object ref -> (replica, shard)


class PoolLLM:
    """An `LLM` whose batches are answered by `replicas` engine replicas (Ray actors), started on first use."""

    def __init__(self, llm: LLMSpec, replicas: int) -> None:
        self.spec, self.replicas = llm, replicas
        self.model_id, self.sampling = model_id_for(llm.model), local_sampling(llm.temperature)
        self.actors: list[Any] = []
        self.rules = SHARD_RULES  # how batches are cut: the CPU's shards, or the GPU's once replicas sit on GPUs
        self.calls = 0

    def start(self) -> list[Any]:
        """The replicas' actors, started (and their placement checked) on the first call."""
        if not self.actors:
            import ray

            init_ray(None, max(self.replicas, os.cpu_count() or 1))  # (the CLI connected first where it runs)
            where = placement(self.spec, self.replicas)
            cpu = "num_gpus" not in where
            self.rules = SHARD_RULES if cpu else GPU_SHARD_RULES
            threads = self.spec.threads or (1 if cpu else None)
            cls = ray.remote(max_restarts=RESTARTS, max_task_retries=RESTARTS, max_concurrency=1, **where)(Replica)
            s = self.spec
            self.actors = [cls.remote(s.model, "cpu" if cpu else s.device, s.dtype, s.temperature, threads, s.batch_tokens)
                           for _ in range(self.replicas)]
        return self.actors

    def send(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> Flight:
        """The batch cut into shards and planned over the replicas, and each replica's first shard sent."""
        actors = self.start()
        parts = shards(messages, self.rules)
        plan = Dispatch(assign(parts, messages, len(actors)), [shard_cost(p, messages) for p in parts], len(actors))
        flight = Flight(requests, messages, parts, plan)
        for k in range(len(actors)):
            self.next_shard(flight, k)
        self.calls += 1
        return flight

    def next_shard(self, flight: Flight, replica: int) -> None:
        """Replica `replica` is free: send it the next pending shard, if any."""
        i = flight.plan.next(replica)
        if i is not None:
            part = flight.parts[i]
            ref = self.actors[replica].answer.remote([flight.requests[j] for j in part], [flight.messages[j] for j in part])
            flight.running[ref] = (replica, i)

    def answer(self, requests: Sequence[DecisionRequest], messages: Sequence[Messages]) -> list[Answer]:
        """The batch's shards answered by the replicas, each taking the next as it finishes one; the answers back in
        request order."""
        import ray
        from ray.exceptions import RayActorError, RayTaskError

        if not requests:
            return []
        flight = self.send(requests, messages)
        out: list[Optional[Answer]] = [None] * len(requests)
        while flight.running:
            done, _ = ray.wait(list(flight.running), num_returns=1)
            replica, i = flight.running.pop(done[0])
            try:
                got = ray.get(done[0])
            except RayActorError as exc:  # a replica died more than RESTARTS times (the shards still running are dropped)
                raise BackendUnavailable(f"an engine replica died and could not be restarted: {str(exc).splitlines()[0]}") from None
            except RayTaskError as exc:  # the engine itself raised: the same error as a local model's
                raise exc.as_instanceof_cause() from None
            for j, a in zip(flight.parts[i], got):
                out[j] = a
            self.next_shard(flight, replica)
        return out  # type: ignore[return-value]

    def stats(self) -> list[dict[str, Any]]:
        """Each replica's `Replica.stats`."""
        import ray

        return ray.get([a.stats.remote() for a in self.actors])

    def close(self) -> None:
        """Stop the replicas."""
        import ray

        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors = []


def pool_llm_factory(llm: LLMSpec) -> Callable[[], LLM]:
    """An `llm_factory` for `make_llm_backend`: a pool of `llm.replicas` replicas."""
    return lambda: PoolLLM(llm, int(llm.replicas or 1))
