"""Engine benchmark: the scripted commons at 1,000 and 10,000 fishers.

Measures, all in one run on one machine (ratios only mean something within a run):
- end to end with the SQLite store: agent-steps per second, store bytes per agent-step, peak RSS
  (each case in a fresh subprocess, so peak memory is its own);
- the tick without the store (`on_tick=None`) against a plain Mesa model written with the same
  rules (random catches, unit-by-unit rationing, regrowth, per-tick gain and equality), the
  ratio engine / plain.

    python benchmarks/engine.py [--sizes 1000 10000] [--months 12] [--out benchmarks/results/engine.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _sets(n: int, months: int) -> list[str]:
    # capacity grows with N so that random catches (0..stock/N) are not all zero
    return [f"fishers={n}", f"months={months}", "strategy=random", f"capacity={20 * n}", "collapse_below=0"]


def end_to_end(n: int, months: int) -> dict:
    """One run through the runner into a fresh SQLite file (call in a subprocess)."""
    import resource

    from sim.config import build_spec
    from sim.runner import execute
    from sim.store import Store

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


def engine_only(n: int, months: int) -> float:
    """Seconds for the SocietyModel's ticks with no store (best of 3)."""
    from agents.scripted import ScriptedBackend
    from scenarios import get_scenario
    from sim.broker import DecisionBroker
    from sim.config import build_spec

    cls = get_scenario("commons")
    spec = build_spec("commons", sets=_sets(n, months), seed=1)
    best = math.inf
    for _ in range(3):
        model = cls(cls.Config.model_validate(spec.config), seed=1, broker=DecisionBroker({"scripted": ScriptedBackend(cls.strategies)}))
        started = time.perf_counter()
        while model.running and model.tick < months:
            model.step()
        best = min(best, time.perf_counter() - started)
    return best


def plain_mesa(n: int, months: int) -> float:
    """Seconds for a plain Mesa model with the same rules (best of 3)."""
    import mesa

    from sim.metrics import equality

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

    best = math.inf
    for _ in range(3):
        model = Commons(1)
        started = time.perf_counter()
        for _ in range(months):
            model.step()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--months", type=int, default=12)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "engine.json"))
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(end_to_end(args.child, args.months)))
        return
    cases = []
    for n in args.sizes:
        proc = subprocess.run([sys.executable, __file__, "--child", str(n), "--months", str(args.months)],
                              capture_output=True, text=True, cwd=ROOT, check=True)
        e2e = json.loads(proc.stdout.strip().splitlines()[-1])
        eng, plain = engine_only(n, args.months), plain_mesa(n, args.months)
        case = {**e2e, "tick_no_store_s": round(eng / args.months, 5), "plain_mesa_tick_s": round(plain / args.months, 5),
                "engine_vs_plain_mesa": round(eng / plain, 2)}
        print(json.dumps(case), flush=True)
        cases.append(case)
    out = {"benchmark": "engine", "scenario": "commons (scripted, random strategy)", "months": args.months,
           "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count()},
           "targets": {"agent_steps_per_s": ">= 20000", "engine_vs_plain_mesa": "<= 2", "store_bytes_per_agent_step": "<= 300"},
           "cases": cases, "when": time.strftime("%Y-%m-%d")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
