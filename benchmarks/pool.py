"""The inference pool on this machine: one tick's LLM decisions on 1 and on 2 local CPU replicas. Writes JSON.

    python benchmarks/pool.py [--fishers 64] [--social 256] [--reps 3] [--out benchmarks/results/pool-cpu.json]

Two ticks, both on the embedded model, each replica a Ray actor with one CPU and one torch thread
(agents.llm.pool): a fishery month of `--fishers` harvest decisions (month 4, memory filled) and
a social-network tick of `--social` members (all active, feeds filled by two scripted ticks:
choose, write, stance). Both pools are alive together and the ticks run in turns (1, 2, 2, 1...),
so the ratio is measured in one run on the same prompts; medians are reported (only the LLM tick is
timed: the social network's scripted warm-up is built before the clock starts). Every answer is
compared across the pools (values and log-probabilities). Per replica: the prompt tokens of its
requests, the share of them it did not forward (a shared prefix computed once and reused) and its CPU
seconds; per case: each batch's shard sizes, the load average, and the cores the replicas got (their CPU
seconds over the wall seconds: on a shared machine, the benchmark's session's share; see agents/llm/pool.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from agents.llm.backend import LLMBackend  # noqa: E402
from agents.llm.pool import SHARD_RULES, PoolLLM  # noqa: E402
from agents.llm.prompts import render_messages  # noqa: E402
from agents.llm.shared import init_ray  # noqa: E402
from agents.llm.sharding import shards  # noqa: E402
from llm_throughput import harvest_requests  # noqa: E402
from sim.core.spec import LLMSpec  # noqa: E402
from sim.tick.broker import DecisionBroker  # noqa: E402
from social import warm_social  # noqa: E402

POOLS = (1, 2)


def social_model(members: int):
    """A social network of `members` LLM members, all active, after two ticks answered by their scripted strategy
    (benchmarks/social.py's warm-up, feeds of 5)."""
    return warm_social(members, 5)[1]


def forwarded(stats: dict) -> int:
    return stats.get("prefix_tokens", 0) + stats.get("suffix_tokens", 0)


class RecordingPool(PoolLLM):
    """A pool that keeps the shard sizes of every batch it is sent (one list per batch)."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.batches: list[list[int]] = []

    def send(self, requests, messages):
        flight = super().send(requests, messages)
        self.batches.append([len(p) for p in flight.parts])
        return flight


def measure(pool: RecordingPool, make) -> tuple[float, list, list[dict], list[list[int]]]:
    """Seconds of the tick `make(pool)` returns (made before the clock starts), its answers, per replica (requests,
    prompt tokens, tokens forwarded, CPU seconds) during it, and its batches' shard sizes."""
    run = make(pool)
    before = pool.stats()
    pool.batches = []
    t = time.perf_counter()
    answers = run()
    seconds = time.perf_counter() - t
    after = pool.stats()
    rows = [{"requests": a["requests"] - b["requests"], "prompt_tokens": a["tokens_in"] - b["tokens_in"],
             "forwarded_tokens": forwarded(a) - forwarded(b), "cpu_s": round(a.get("cpu_s", 0) - b.get("cpu_s", 0), 2)}
            for a, b in zip(after, before)]
    return seconds, answers, rows, pool.batches


def fishery(requests, messages):
    def make(pool: PoolLLM):
        return lambda: [(a.value, a.logprobs) for a in pool.answer(requests, messages)]
    return make


def social(members: int):
    def make(pool: PoolLLM):
        model = social_model(members)  # (its two scripted warm-up ticks are not timed)
        backend = LLMBackend(pool.model_id, pool.sampling, llm=pool)
        model.broker = DecisionBroker({"llm": backend})

        def run():
            model.step()
            return [(c["phase"], c["agent_id"], c["answer"], c["logprobs"]) for c in backend.drain_calls()]
        return run
    return make


def case(name: str, make, pools: dict[int, RecordingPool], reps: int) -> dict:
    seconds: dict[int, list[float]] = {n: [] for n in pools}
    share: dict[int, list[float]] = {n: [] for n in pools}
    replicas: dict[int, list[dict]] = {}
    answers: dict[int, list] = {}
    batches: list[list[int]] = []
    load_start = os.getloadavg()[0]
    for rep in range(reps):
        for n in (POOLS if rep % 2 == 0 else POOLS[::-1]):
            s, got, rows, batches = measure(pools[n], make)
            seconds[n].append(round(s, 2))
            share[n].append(round(sum(r["cpu_s"] for r in rows) / s, 2))
            replicas[n], answers[n] = rows, got
            print(f"{name} rep {rep} on {n} replicas: {s:.1f}s, the replicas' CPU {share[n][-1]} cores, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    med = {n: statistics.median(v) for n, v in seconds.items()}
    # the busiest replica's CPU seconds: what the tick would take on cores of its own (a shared machine's wall time
    # also counts the time other processes held the cores)
    critical = {n: max(r["cpu_s"] for r in rows) for n, rows in replicas.items()}
    out = {"load_avg_at_start": round(load_start, 2), "load_avg_at_end": round(os.getloadavg()[0], 2),
           "seconds": {str(n): v for n, v in seconds.items()}, "median_s": {str(n): round(v, 2) for n, v in med.items()},
           "speedup_2_over_1": round(med[1] / med[2], 2),
           # CPU seconds of all replicas over wall seconds: the cores the pool got (2 is all of this machine)
           "replicas_cores_used": {str(n): v for n, v in share.items()},
           "busiest_replica_cpu_s_last_rep": {str(n): v for n, v in critical.items()},
           "cpu_speedup_2_over_1": round(critical[1] / critical[2], 2) if critical[2] else None,
           "identical_answers": all(answers[n] == answers[POOLS[0]] for n in POOLS),
           "decisions": len(answers[POOLS[0]]), "shards_per_batch": batches, "replicas": {}}
    for n, rows in replicas.items():
        out["replicas"][str(n)] = [{**r, "prefix_reuse": round(1 - r["forwarded_tokens"] / r["prompt_tokens"], 3)
                                    if r["prompt_tokens"] else None} for r in rows]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fishers", type=int, default=64)
    ap.add_argument("--social", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--social-reps", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "pool-cpu.json"))
    args = ap.parse_args()
    import ray

    init_ray(None, max(sum(POOLS), os.cpu_count() or 1))
    llm = LLMSpec()
    pools = {n: RecordingPool(llm, n) for n in POOLS}
    requests = harvest_requests(args.fishers, months_before=3)
    messages = [render_messages(r) for r in requests]
    t = time.perf_counter()
    for p in pools.values():  # every replica loads its model before anything is timed
        ray.get([a.answer.remote(requests[:2], messages[:2]) for a in p.start()])
    load_s = time.perf_counter() - t
    results = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(),
                    "load_avg_at_start": os.getloadavg()[0]},
        "setup": {"replica": "Ray actor, 1 CPU, 1 torch thread, fp32, embedded SmolLM2-135M",
                  "fishery_shards": [len(s) for s in shards(messages, SHARD_RULES)], "warm_up_s": round(load_s, 1),
                  "reps": args.reps, "order": "1, 2 replicas then 2, 1 in turns; medians"},
        "fishery": case(f"fishery {args.fishers}", fishery(requests, messages), pools, args.reps),
    }
    results["fishery"]["agents"] = args.fishers
    print(json.dumps(results["fishery"]), flush=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")  # (each case kept as soon as it is measured)
    if args.social:
        results["social"] = case(f"social {args.social}", social(args.social), pools, args.social_reps)
        results["social"]["members"] = args.social
        print(json.dumps(results["social"]), flush=True)
    results["machine"]["load_avg_at_end"] = os.getloadavg()[0]
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
