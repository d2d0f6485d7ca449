"""Engine benchmark: the scripted commons at 1,000 and 10,000 fishers.

Measures, all in one run on one machine (ratios only mean something within a run):
- end to end with the SQLite store: agent-steps per second, store bytes per agent-step, peak RSS
  (each case in a fresh subprocess, so peak memory is its own);
- the tick without the store (`on_tick=None`) against a plain Mesa model written with the same
  rules (random catches, unit-by-unit rationing, regrowth, per-tick gain and equality): the
  ratio engine / plain is the median of paired rounds (each round times both, each side first
  in turn, each the best of enough runs to fill 0.3 s), with every round's ratio and the
  best-times ratio kept;
- the same engine with its harvest asked agent by agent (`observe_batch` off: one
  DecisionRequest and one Decision per fisher), to show what the columnar path is worth.

    python benchmarks/engine.py [--sizes 1000 10000] [--months 12] [--rounds 5] [--out benchmarks/results/engine.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.timing import rounds as paired_rounds  # noqa: E402


def _sets(n: int, months: int) -> list[str]:
    # capacity grows with N so that random catches (0..stock/N) are not all zero
    return [f"fishers={n}", f"months={months}", "strategy=random", f"capacity={20 * n}", "collapse_below=0"]


def end_to_end(n: int, months: int) -> dict:
    """One run through the runner into a fresh SQLite file (call in a subprocess)."""
    import resource

    from runner.config import build_spec
    from runner.execution import execute
    from sim.store.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.db"
        store = Store(f"sqlite:///{path}")
        empty = path.stat().st_size
        spec = build_spec("commons", sets=_sets(n, months), seed=1)
        started = time.perf_counter()
        result = execute(spec, store)
        wall = time.perf_counter() - started
        store.engine.dispose()
        size = path.stat().st_size - empty
    steps = n * result.ticks
    return {"agents": n, "ticks": result.ticks, "agent_steps": steps, "wall_s": round(wall, 3),
            "agent_steps_per_s": round(steps / wall), "store_bytes_per_agent_step": round(size / steps, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def engine_ticks(n: int, months: int, batched: bool = True) -> float:
    """Seconds for the SocietyModel's ticks with no store; `batched=False` asks every fisher one by one."""
    from agents.scripted import ScriptedBackend
    from scenarios import get_scenario
    from sim.tick.broker import DecisionBroker
    from runner.config import build_spec

    cls = get_scenario("commons")
    if not batched:
        cls = type("OneByOne", (cls,), {"observe_batch": lambda self, phase: None})
    spec = build_spec("commons", sets=_sets(n, months), seed=1)
    model = cls(cls.Config.model_validate(spec.config), seed=1, broker=DecisionBroker({"scripted": ScriptedBackend(cls.strategies)}))
    started = time.perf_counter()
    while model.running and model.tick < months:
        model.step()
    return time.perf_counter() - started


def plain_mesa(n: int, months: int) -> float:
    """Seconds for a plain Mesa model with the same rules."""
    import mesa

    from sim.reward.metrics import equality

    class Fisher(mesa.Agent):
        def __init__(self, model):
            super().__init__(model)
            self.demand = 0.0
            self.gain = 0.0

        def step(self):
            m = self.model
            self.demand = float(min(m.random.randint(0, math.floor(m.stock / m.n)), math.floor(m.stock)))

    class Commons(mesa.Model):
        def __init__(self, seed):
            super().__init__(seed=seed)
            self.n, self.capacity, self.stock = n, 20.0 * n, 20.0 * n
            for _ in range(n):
                Fisher(self)

        def step(self):
            if self.steps > 1:
                self.stock = min(self.capacity, self.stock * 2)
            self.agents.shuffle_do("step")
            demand = {a.unique_id: a.demand for a in self.agents}
            if sum(demand.values()) > self.stock:
                caught = {k: 0.0 for k in demand}
                left = {k: v for k, v in demand.items() if v > 0}
                ids, avail = sorted(left), self.stock
                while avail > 1e-9 and ids:
                    j = self.random.randrange(len(ids))
                    k = ids[j]
                    unit = min(1.0, left[k], avail)
                    caught[k] += unit
                    avail -= unit
                    left[k] -= unit
                    if left[k] <= 1e-9:
                        ids[j] = ids[-1]
                        ids.pop()
            else:
                caught = demand
            for a in self.agents:
                a.gain += caught[a.unique_id]
            self.stock -= sum(caught.values())
            gains = [a.gain for a in self.agents]
            self.metrics = {"gain": sum(gains) / n, "equality": equality(gains), "stock": self.stock}

    model = Commons(1)
    started = time.perf_counter()
    for _ in range(months):
        model.step()
    return time.perf_counter() - started


def tick_rounds(n: int, months: int, rounds: int, min_s: float = 0.3) -> dict:
    """Paired rounds of the engine, the plain Mesa model and the one-by-one engine (the first of each
    round taking turns; each side's time in a round is the best of as many runs, at least 3, as
    fill `min_s`), and their ratios: the median of the rounds' ratios, and best time / best time."""
    sides = {"engine": lambda: engine_ticks(n, months), "plain": lambda: plain_mesa(n, months),
             "one_by_one": lambda: engine_ticks(n, months, batched=False)}
    repeats = {k: max(3, min(30, math.ceil(min_s / max(fn(), 1e-6)))) for k, fn in sides.items()}  # (a warm-up run each)
    times = paired_rounds(sides, rounds, best_of=repeats)
    ratio = [e / p for e, p in zip(times["engine"], times["plain"])]
    gain = [o / e for o, e in zip(times["one_by_one"], times["engine"])]
    best = {k: min(v) for k, v in times.items()}
    return {"tick_no_store_s": round(best["engine"] / months, 5), "plain_mesa_tick_s": round(best["plain"] / months, 5),
            "one_by_one_tick_s": round(best["one_by_one"] / months, 5),
            "engine_vs_plain_mesa": round(statistics.median(ratio), 2),
            "engine_vs_plain_mesa_rounds": [round(x, 2) for x in ratio],
            "engine_vs_plain_mesa_best_times": round(best["engine"] / best["plain"], 2),
            "batched_speedup_over_one_by_one": round(statistics.median(gain), 2), "repeats_per_round": repeats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--months", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=5, help="paired rounds of the tick timings (median of their ratios)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "engine.json"))
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(end_to_end(args.child, args.months)))
        return
    # every end-to-end case first, while this process is small: a child's peak RSS counts the pages
    # it shares with its parent when it is forked
    e2e = {}
    for n in args.sizes:
        proc = subprocess.run([sys.executable, __file__, "--child", str(n), "--months", str(args.months)],
                              capture_output=True, text=True, cwd=ROOT, check=True)
        e2e[n] = json.loads(proc.stdout.strip().splitlines()[-1])
    cases = []
    for n in args.sizes:
        case = {**e2e[n], **tick_rounds(n, args.months, args.rounds)}
        print(json.dumps(case), flush=True)
        cases.append(case)
    out = {"benchmark": "engine", "scenario": "commons (scripted, random strategy)", "months": args.months,
           "rounds": args.rounds,
           "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count()},
           "targets": {"agent_steps_per_s": ">= 20000", "engine_vs_plain_mesa": "<= 2", "store_bytes_per_agent_step": "<= 300"},
           "cases": cases, "when": time.strftime("%Y-%m-%d")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
