"""Benchmark of the social scenario at scale; writes benchmarks/results/social-<device>.json.

Two cases, each in its own process (so peak memory is the case's own):
- scripted: N scripted members x T ticks (default 10,000 x 100) through the real runner and
  a SQLite store: wall and CPU seconds, agent-steps per second, peak RSS, store bytes per
  agent-step, and where the time goes (scenario hooks, broker + strategies, store commit, the
  rest of the base tick).
- llm: one tick of M LLM members (all active): two warm-up ticks with a stand-in backend
  fill the feeds, then the measured tick goes to the LLM backend; requests per phase, batches
  sent to the engine, tokens and seconds. `all` runs it twice: 1,000 members with a stand-in
  engine (prompts, cache keys, batching: everything but the model) and `--real-llm-agents`
  (64) on the embedded model, whose cost grows linearly in the batch (prefill is compute-bound).

    python benchmarks/social.py                      # both cases, default sizes
    python benchmarks/social.py --agents 2000 --ticks 20 --llm-agents 100
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
HOOKS = ("update", "observe", "act", "payoffs", "scenario_metrics", "state", "final_metrics")


def _timed_class(cls, timers):
    """A subclass of the scenario whose hooks add their wall time to `timers`."""
    attrs = {}
    for name in HOOKS:
        orig = getattr(cls, name)

        def wrap(self, *a, _o=orig, _n=name, **k):
            t, c = time.perf_counter(), time.process_time()
            try:
                return _o(self, *a, **k)
            finally:
                timers[_n] += time.perf_counter() - t
                timers[_n + ":cpu"] += time.process_time() - c
        attrs[name] = wrap
    return type(cls.__name__, (cls,), attrs)


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def case_scripted(agents: int, ticks: int) -> dict:
    import scenarios
    from sim.tick import broker as broker_mod
    from runner.config import build_spec
    from runner.execution import execute
    from sim.store.store import Store

    timers: dict[str, float] = defaultdict(float)
    scenarios.REGISTRY["social"] = _timed_class(scenarios.REGISTRY["social"], timers)
    decide = broker_mod.DecisionBroker.decide

    def timed_decide(self, requests):
        t, c = time.perf_counter(), time.process_time()
        try:
            return decide(self, requests)
        finally:
            timers["broker+strategies"] += time.perf_counter() - t
            timers["broker+strategies:cpu"] += time.process_time() - c
    broker_mod.DecisionBroker.decide = timed_decide
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "runs.db"
        store = Store(f"sqlite:///{db}")
        record = store.record_tick

        def timed_record(*a, **k):
            t, c = time.perf_counter(), time.process_time()
            try:
                return record(*a, **k)
            finally:
                timers["store.record_tick"] += time.perf_counter() - t
                timers["store.record_tick:cpu"] += time.process_time() - c
        store.record_tick = timed_record
        spec = build_spec("social", sets=[f"agents={agents}"], ticks=ticks, seed=0)
        wall, cpu = time.perf_counter(), time.process_time()
        result = execute(spec, store)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        size = sum(p.stat().st_size for p in Path(tmp).glob("runs.db*"))
        from sqlalchemy import text

        with store.engine.connect() as conn:
            rows = {t: conn.execute(text(f"select count(*) from {t}")).scalar() for t in ("agent_steps", "events", "ticks")}
    steps = agents * result.ticks
    hooks = {k: round(timers[k + ":cpu"], 3) for k in HOOKS}
    scenario_s = sum(timers[k] for k in HOOKS)
    scenario_cpu = sum(timers[k + ":cpu"] for k in HOOKS)
    accounted = scenario_s + timers["broker+strategies"] + timers["store.record_tick"]
    accounted_cpu = scenario_cpu + timers["broker+strategies:cpu"] + timers["store.record_tick:cpu"]
    return {
        "agents": agents, "ticks": result.ticks, "status": result.status, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
        "agent_steps": steps, "agent_steps_per_s": round(steps / wall, 1), "agent_steps_per_cpu_s": round(steps / cpu, 1),
        "peak_rss_mb": round(_peak_mb(), 1), "store_bytes": size, "store_bytes_per_agent_step": round(size / steps, 1),
        "rows": rows, "messages": result.metrics.get("messages_total"),
        "load_average_after": os.getloadavg()[0],
        "wall_s_by_part": {"scenario_hooks": round(scenario_s, 2), "broker+strategies": round(timers["broker+strategies"], 2),
                           "store.record_tick": round(timers["store.record_tick"], 2), "base_tick_rest": round(wall - accounted, 2)},
        "cpu_s_by_part": {"scenario_hooks": round(scenario_cpu, 2), "scenario_hooks_detail": hooks,
                          "broker+strategies": round(timers["broker+strategies:cpu"], 2),
                          "store.record_tick": round(timers["store.record_tick:cpu"], 2),
                          "base_tick_rest": round(cpu - accounted_cpu, 2)},
        "note": "observe() is called for every member in every phase by the base tick; its timer wraps each call "
                "(~1 us of timing overhead per call is included); wall times depend on the machine's load, CPU times less",
    }


class CountingEngine:
    """A stand-in engine (no model): first option / fixed text; records the batch sizes it is sent."""

    model_id = "stand-in"
    sampling: dict = {}

    def __init__(self) -> None:
        self.batches: list[int] = []

    def answer(self, requests, messages):
        from agents.llm.backend import Answer

        self.batches.append(len(requests))
        return [Answer(r.space.options[0] if hasattr(r.space, "options") else "A short message.", raw="") for r in requests]


def warm_social(agents: int, feed_size: int) -> tuple:
    """(spec, model): a social network of `agents` LLM members, all active and engaged, after two warm-up ticks
    whose `llm` requests the scripted strategy answers (stances 'neutral'), so the feeds are full for a measured
    tick. Shared by this benchmark and benchmarks/pool.py."""
    import random

    from agents.scripted import ScriptedBackend
    from scenarios.social.model import SocialModel
    from sim.tick.broker import DecisionBroker
    from runner.config import build_spec
    from sim.core.contracts import Decision

    class StandIn(ScriptedBackend):
        """Warm-up answers for `llm` requests: the scripted strategy; stances 'neutral'."""

        name = "llm"

        def decide_batch(self, requests):
            rest = [r for r in requests if r.phase != "stance"]
            got = iter(super().decide_batch(rest))
            return [Decision(r.agent_id, r.phase, "neutral", "llm") if r.phase == "stance" else next(got) for r in requests]

    spec = build_spec("social", sets=[f"agents={agents}", "activity=1", "activity_skew=0", f"feed_size={feed_size}"],
                      ticks=3, policy="llm", seed=0)
    cfg = SocialModel.Config.model_validate(spec.config)
    model = SocialModel(cfg, seed=0, broker=DecisionBroker({"llm": StandIn(SocialModel.strategies)}), policy="llm")
    for m in model.members:
        m.strategy = "engaged"
    random.seed(0)
    model.step()
    model.step()
    return spec, model


def case_llm(agents: int, feed_size: int, stand_in: bool = False) -> dict:
    from agents.llm.factory import make_llm_backend
    from sim.tick.broker import DecisionBroker

    spec, model = warm_social(agents, feed_size)
    if stand_in:
        from agents.llm.backend import LLMBackend

        backend = LLMBackend("stand-in", {}, llm=CountingEngine())
        load_s = 0.0
    else:
        backend = make_llm_backend(spec, None)
        t = time.perf_counter()
        backend.llm.lm  # load the model outside the measured tick
        load_s = time.perf_counter() - t
    phases: dict[str, dict] = {}
    decide = backend.decide_batch

    def timed(requests):
        t0 = time.perf_counter()
        out = decide(requests)
        calls = backend.pending[-len(requests):]
        phases[requests[0].phase] = {"requests": len(requests), "seconds": round(time.perf_counter() - t0, 2),
                                     "tokens_in": sum(c["tokens_in"] for c in calls),
                                     "tokens_out": sum(c["tokens_out"] for c in calls),
                                     "fallbacks": sum(c["fallback"] for c in calls)}
        return out
    backend.decide_batch = timed
    model.broker = DecisionBroker({"llm": backend})
    wall = time.perf_counter()
    model.step()
    wall = time.perf_counter() - wall
    engine = backend.llm
    return {
        "engine": "stand-in (no model: measures prompts, cache keys and batching)" if stand_in else backend.model_id,
        "batch_sizes_sent_to_engine": getattr(engine, "batches", None),
        "llm_agents": agents, "active": int(model.readers.size), "feed_size": feed_size, "model_load_s": round(load_s, 1),
        "tick_wall_s": round(wall, 1), "phases": phases, "engine_calls": backend.llm_batches,
        "engine_max_batch": getattr(engine, "_args", {}).get("max_batch"),
        "decisions_per_s": round(sum(p["requests"] for p in phases.values()) / wall, 2),
        "peak_rss_mb": round(_peak_mb(), 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--case", choices=("scripted", "llm", "all"), default="all")
    ap.add_argument("--agents", type=int, default=10_000)
    ap.add_argument("--ticks", type=int, default=100)
    ap.add_argument("--llm-agents", type=int, default=1000, help="LLM case: members in the tick (stand-in engine in `all`)")
    ap.add_argument("--real-llm-agents", type=int, default=64, help="`all`: members of the tick on the real model")
    ap.add_argument("--feed-size", type=int, default=5, help="LLM case: items per feed (prompt length)")
    ap.add_argument("--stand-in", action="store_true", help="LLM case without a model: bookkeeping and batching only")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    if args.case == "scripted":
        print(json.dumps(case_scripted(args.agents, args.ticks)))
        return
    if args.case == "llm":
        print(json.dumps(case_llm(args.llm_agents, args.feed_size, args.stand_in)))
        return
    results = {"date": time.strftime("%Y-%m-%d"), "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                                               "python": platform.python_version()}}
    for case, extra in (("scripted", ["--agents", str(args.agents), "--ticks", str(args.ticks)]),
                        ("llm", ["--llm-agents", str(args.llm_agents), "--feed-size", str(args.feed_size), "--stand-in"]),
                        ("llm", ["--llm-agents", str(args.real_llm_agents), "--feed-size", str(args.feed_size)])):
        key = case if case == "scripted" else ("llm_stand_in" if "--stand-in" in extra else "llm_model")
        proc = subprocess.run([sys.executable, __file__, "--case", case, *extra], capture_output=True, text=True, cwd=ROOT)
        if proc.returncode != 0:
            results[key] = {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
        else:
            results[key] = json.loads(proc.stdout.strip().splitlines()[-1])
        print(key, json.dumps(results[key]), flush=True)
    try:
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:
        device = "cpu"
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"social-{device}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
