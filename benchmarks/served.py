"""Served models at full throughput: one tick of N LLM agents through a real llama.cpp server. Writes JSON.

    python benchmarks/served.py [--agents commons=64,social=64] [--threads 2] [--out benchmarks/results/served-cpu.json]

Starts `python -m llama_cpp.server` (llama-cpp-python) on the embedded SmolLM2 GGUF, bound to 127.0.0.1 on a free
port, and runs one tick of the fishery and of the social network (every member active) three ways, in one run:

- `platform`: the platform's served provider (`llm.provider: served`, `structured: llama_cpp`): the whole tick's calls
  in flight at once (up to `max_concurrency`), sorted by prompt with the first alone (prefix caching);
- `sequential`: the same server, one call per agent in sequence (`max_concurrency: 1`), what mesa-llm does;
- `in_process`: the embedded engine in this process (batched, no server).

Each is a real run on a fresh in-memory store (no cache hit), after a warm-up run of each mode; the modes run
interleaved for `--rounds` rounds (order rotated), and decisions/s and tokens/s (over the tick's stored duration) are
medians. The server is killed at the end. Ratios are within this run only.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.llm.local.ids import embedded_model_path  # noqa: E402
from runner.config import build_spec  # noqa: E402
from runner.execution import execute  # noqa: E402
from sim.store.store import Store  # noqa: E402

SERVED_NAME = "smollm2"
#: one tick of each scenario with every agent deciding (N filled in)
SCENARIOS = {"commons": lambda n: [f"fishers={n}", "months=1", "collapse_below=0"],
             "social": lambda n: [f"agents={n}", "ticks=1", "activity=1.0", "activity_skew=0"]}


def start_server(threads: int, ctx: int) -> tuple[subprocess.Popen, str]:
    """llama_cpp.server on the embedded GGUF at 127.0.0.1:<free port>; its base URL once /v1/models answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_model_path()),
                             "--model_alias", SERVED_NAME, "--host", "127.0.0.1", "--port", str(port),
                             "--n_ctx", str(ctx), "--n_threads", str(threads), "--verbose", "False"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=2) as r:
                if r.status == 200:
                    return proc, url
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit(f"llama_cpp.server did not start (exit code {proc.poll()})")
        time.sleep(0.5)


def llm_block(mode: str, url: str, concurrency: int) -> dict[str, Any]:
    if mode == "in_process":
        return {}
    return {"provider": "served", "endpoint": url, "model": SERVED_NAME, "structured": "llama_cpp",
            "max_concurrency": concurrency if mode == "platform" else 1, "timeout_s": 600}


def one_tick(scenario: str, n: int, llm: dict[str, Any], seed: int) -> dict[str, Any]:
    """Run one tick on a fresh store; the tick's duration and its LLM calls' counts and tokens."""
    store = Store("sqlite://")
    spec = build_spec(scenario, policy="llm", sets=SCENARIOS[scenario](n), seed=seed, llm=llm or None)
    run_id = execute(spec, store).run_id
    [tick] = store.ticks(run_id)
    calls = store.llm_calls(run_id)
    assert not any(c.cache_hit for c in calls), "a benchmark tick must not read the cache"
    tokens_in, tokens_out = sum(c.tokens_in for c in calls), sum(c.tokens_out for c in calls)
    fallbacks = sum(s.fallback for s in store.steps(run_id))
    secs = tick.duration_s
    return {"tick_s": round(secs, 3), "decisions": len(calls), "fallbacks": fallbacks, "tokens_in": tokens_in,
            "tokens_out": tokens_out, "decisions_per_s": round(len(calls) / secs, 3),
            "tokens_per_s": round((tokens_in + tokens_out) / secs, 1), "output_tokens_per_s": round(tokens_out / secs, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agents", default="commons=64,social=64",
                    help="LLM agents deciding in the tick, per scenario (scenario=N,...), or one N for all")
    ap.add_argument("--threads", type=int, default=2, help="the server's and the engine's CPU threads")
    ap.add_argument("--concurrency", type=int, default=16, help="the platform's max_concurrency (calls in flight)")
    ap.add_argument("--ctx", type=int, default=4096, help="the server's context size")
    ap.add_argument("--scenarios", default="commons,social")
    ap.add_argument("--rounds", type=int, default=3, help="ticks per mode, interleaved; medians are reported")
    ap.add_argument("--note", default="", help="a note stored in the JSON (e.g. why fewer agents)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/served-cpu.json"))
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    scenarios = args.scenarios.split(",")
    agents = ({k: int(v) for k, v in (part.split("=") for part in args.agents.split(","))} if "=" in args.agents
              else dict.fromkeys(scenarios, int(args.agents)))
    proc, url = start_server(args.threads, args.ctx)
    results: dict[str, Any] = {}
    try:
        for scenario in scenarios:
            row: dict[str, Any] = {}
            modes = ["platform", "sequential", "in_process"]
            for mode in modes:  # warm-up: the model loaded, the server's first request done
                one_tick(scenario, 2, llm_block(mode, url, args.concurrency), seed=99)
            rounds: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
            for k in range(args.rounds):  # the modes interleaved, their order rotated: a loaded machine drifts
                for mode in modes[k % 3:] + modes[:k % 3]:
                    rounds[mode].append(one_tick(scenario, agents[scenario], llm_block(mode, url, args.concurrency),
                                                 seed=0))
                    print(scenario, mode, rounds[mode][-1], flush=True)
            for mode in modes:
                row[mode] = {"agents": agents[scenario], "rounds": rounds[mode],
                             **{f"median_{key}": statistics.median(r[key] for r in rounds[mode])
                                for key in ("tick_s", "decisions_per_s", "tokens_per_s")}}
            p, s, e = row["platform"], row["sequential"], row["in_process"]
            rate = "median_decisions_per_s"
            row["ratios"] = {"platform_vs_sequential": round(p[rate] / s[rate], 2),
                             "in_process_vs_platform": round(e[rate] / p[rate], 2),
                             "in_process_vs_sequential": round(e[rate] / s[rate], 2)}
            results[scenario] = row
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    out = {"benchmark": "served", "agents": {k: agents[k] for k in scenarios}, "ticks": 1, "rounds": args.rounds,
           "concurrency": args.concurrency,
           "server": {"impl": "llama_cpp.server", "version": importlib.metadata.version("llama_cpp_python"),
                      "model": embedded_model_path().name, "threads": args.threads, "n_ctx": args.ctx,
                      "parallel_slots": 1, "why_one_slot": "llama-cpp-python's server has no --n_parallel: it answers "
                      "one request at a time (llama.cpp's own llama-server has -np slots and continuous batching)"},
           "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
           "note": args.note, "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps({k: v["ratios"] for k, v in results.items()}))


if __name__ == "__main__":
    main()
