"""Engine benchmark: every scenario's tick against a plain Mesa model of the same rules, and the fishery end to end.

Measures, all in one run on one machine (ratios only mean something within a run):
- end to end with the SQLite store (each case in a fresh subprocess, so its peak memory is its own): the scripted
  commons at 1,000 and 10,000 fishers, and each scenario at its timed size: agent-steps per second of wall time
  and of CPU time (the machine is shared: CPU time is what other processes change least), store bytes per agent
  step (and which tables hold them), peak RSS;
- each scenario's tick without the store (`on_tick=None`) against its plain Mesa model (benchmarks/plain/), in
  paired rounds (each side the best of enough runs to fill 0.3 s, the first of each round taking turns; the median
  of the rounds' ratios, with every round's and the best times' ratio kept). Two ratios: `full`, the engine's
  whole tick over the plain one; `rules`, the engine's tick less what the plain model does not do (its reward
  layer, Perolat's and the norms' metrics, the step records and the world's snapshot for the store): the time
  spent in the scenario's rules (`update`, the phases' requests, decisions and `act`, `payoffs`,
  `after_reward`) and its own metrics (`scenario_metrics`), less the events they emit (records), measured inside
  the same ticks; `engine_split` says how the engine's tick divides (rules, metrics, events, and the engine's
  own: reward layer, Perolat and norms, records);
- the fishery's harvest asked agent by agent (`observe_batch` off), to show what the columnar path is worth.

Before timing, each plain model must reproduce the engine's per-tick figures on its `check()` config (an
AssertionError names the first difference): otherwise it would measure something else.

    python benchmarks/engine.py [--sizes 1000 10000] [--months 12] [--rounds 5] [--scenarios commons donor ...]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.scripted import ScriptedBackend  # noqa: E402
from benchmarks.plain import commons, donor, grid, market, social  # noqa: E402
from benchmarks.timing import rounds as paired_rounds  # noqa: E402
from scenarios import get_scenario  # noqa: E402
from runner.config import build_spec  # noqa: E402
from sim.tick.broker import DecisionBroker  # noqa: E402

#: each scenario's plain model (its module or class: SCENARIO, timing(), check())
PLAIN: dict[str, Any] = {"commons": commons, "donor": donor, "market": market, "social": social,
                         "gathering": grid.Gathering, "cleanup": grid.Cleanup}
#: the hooks that are the scenario's rules: what the plain models do too (the rest of a tick is the engine's own)
RULES = ("update", "_decide", "payoffs", "scenario_metrics", "after_reward")
TARGETS = {"agent_steps_per_s": ">= 75000 (the fishery end to end)", "store_bytes_per_agent_step": "<= 100",
           "engine_vs_plain_mesa": "<= 1.0 (the fishery at 1,000 and 10,000; every scenario: full and rules ratios)"}


def _timed(cls: type) -> type:
    """The scenario class with its rules' hooks timed: `model.split` holds the seconds spent in them (outermost calls),
    `rules` (the scenario's world and decisions), `metrics` (`scenario_metrics`) and `events` (emitted inside them:
    records, taken out of the other two)."""
    def wrap(name: str) -> Callable[..., Any]:
        original, bucket = getattr(cls, name), "metrics" if name == "scenario_metrics" else "rules"

        def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return original(self, *args, **kwargs)
            self.depth, self.bucket = 1, bucket
            started = time.perf_counter()
            try:
                return original(self, *args, **kwargs)
            finally:
                self.split[bucket] += time.perf_counter() - started
                self.depth = 0
        return timed

    def emit(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return cls.emit(self, *args, **kwargs)
        finally:
            if self.depth:
                spent = time.perf_counter() - started
                self.split[self.bucket] -= spent
                self.split["events"] += spent

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        self.depth, self.bucket = 0, "rules"
        self.split = dict.fromkeys(("rules", "metrics", "events"), 0.0)
        cls.__init__(self, *args, **kwargs)

    return type(cls.__name__, (cls,), {"__init__": init, "emit": emit, **{name: wrap(name) for name in RULES}})


def engine_model(scenario: str, sets: list[str], seed: int = 1, *, timed: bool = False, batched: bool = True) -> Any:
    """The scenario's model for these `--set`s, scripted, without a store."""
    cls = get_scenario(scenario)
    if not batched:
        cls = type("OneByOne", (cls,), {"observe_batch": lambda self, phase: None})
    if timed:
        cls = _timed(cls)
    spec = build_spec(scenario, sets=sets, seed=seed)
    return cls(cls.Config.model_validate(spec.config), seed=seed, broker=DecisionBroker({"scripted": ScriptedBackend(cls.strategies)}))


def engine_ticks(scenario: str, sets: list[str], ticks: int, *, batched: bool = True) -> tuple[float, dict[str, float]]:
    """(seconds of the engine's ticks, how they split: `rules`, `metrics`, `events`), without a store."""
    model = engine_model(scenario, sets, timed=True, batched=batched)
    model.split = dict.fromkeys(model.split, 0.0)  # (the world's setup is not a tick)
    started = time.perf_counter()
    while model.running and model.tick < ticks:
        model.step()
    return time.perf_counter() - started, model.split


def plain_ticks(make: Callable[[int], Any], ticks: int) -> float:
    """Seconds of the plain model's ticks."""
    model = make(1)
    started = time.perf_counter()
    while model.running and model.steps < ticks:
        model.step()
    return time.perf_counter() - started


def check(scenario: str) -> int:
    """The plain model reproduces the engine's per-tick figures on its check config; how many values agreed."""
    sets, make, ticks, keys = PLAIN[scenario].check()
    engine, plain = engine_model(scenario, sets, seed=3), make(3)
    compared = 0
    while engine.running and engine.tick < ticks:
        engine.step()
        assert plain.running, f"{scenario}: the plain model stopped before tick {engine.tick}"
        plain.step()
        for mine, theirs in keys.items():
            a, b = plain.metrics[mine], engine.last_metrics[theirs]
            assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), \
                f"{scenario} tick {engine.tick}: plain {mine} = {a!r}, engine {theirs} = {b!r}"
            compared += 1
    assert engine.tick == ticks or not plain.running, f"{scenario}: the engine stopped at tick {engine.tick}, the plain model did not"
    assert compared, f"{scenario}: nothing compared"
    return compared


def tick_rounds(scenario: str, sets: list[str], make: Callable[[int], Any], ticks: int, rounds: int,
                min_s: float = 0.3, one_by_one: bool = False) -> dict[str, Any]:
    """Paired rounds of the engine and the plain model (and the engine asked one by one): the ratios' medians."""
    runs = {"engine": lambda: engine_ticks(scenario, sets, ticks), "plain": lambda: (plain_ticks(make, ticks), {})}
    if one_by_one:
        runs["one_by_one"] = lambda: engine_ticks(scenario, sets, ticks, batched=False)
    repeats = {k: max(3, min(30, math.ceil(min_s / max(fn()[0], 1e-6)))) for k, fn in runs.items()}  # (a warm-up each)
    splits: list[dict[str, float]] = []  # how the engine's best run of each round split

    def best_of(name: str) -> Callable[[], float]:
        def timer() -> float:
            total, split = min((runs[name]() for _ in range(repeats[name])), key=lambda r: r[0])
            if name == "engine":
                splits.append({**split, "engine": total - sum(split.values())})
            return total
        return timer

    times = paired_rounds({k: best_of(k) for k in runs}, rounds)
    full = [e / p for e, p in zip(times["engine"], times["plain"])]
    like = [(s["rules"] + s["metrics"]) / p for s, p in zip(splits, times["plain"])]
    best = {k: min(v) for k, v in times.items()}
    out = {"engine_tick_s": round(best["engine"] / ticks, 6), "plain_mesa_tick_s": round(best["plain"] / ticks, 6),
           "engine_split": {k: round(statistics.median(s[k] / e for s, e in zip(splits, times["engine"])), 3)
                            for k in ("rules", "metrics", "events", "engine")},
           "engine_vs_plain_mesa": round(statistics.median(full), 2),
           "engine_vs_plain_mesa_rounds": [round(x, 2) for x in full],
           "engine_vs_plain_mesa_best_times": round(best["engine"] / best["plain"], 2),
           "rules_vs_plain_mesa": round(statistics.median(like), 2),
           "rules_vs_plain_mesa_rounds": [round(x, 2) for x in like], "repeats_per_round": repeats}
    if one_by_one:
        out["one_by_one_tick_s"] = round(best["one_by_one"] / ticks, 6)
        out["batched_speedup_over_one_by_one"] = round(statistics.median(
            o / e for o, e in zip(times["one_by_one"], times["engine"])), 2)
    return out


# ----- end to end -----------------------------------------------------------------------------------------------
def end_to_end(scenario: str, sets: list[str]) -> dict[str, Any]:
    """One run through the runner into a fresh SQLite file (call in a subprocess)."""
    import sqlite3

    from runner.execution import execute
    from sim.store.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.db"
        store = Store(f"sqlite:///{path}")
        empty = path.stat().st_size
        spec = build_spec(scenario, sets=sets, seed=1)
        started, cpu = time.perf_counter(), time.process_time()
        result = execute(spec, store)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        store.engine.dispose()
        size = path.stat().st_size - empty
        with sqlite3.connect(path) as con:
            steps = con.execute("SELECT count(*) FROM agent_steps").fetchone()[0]
            pages = dict(con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())
    by_table = {table: round(sum(size for name, size in pages.items() if name == table or name.endswith(f"_{table}_1")
                                 or name.startswith(f"ix_{table}_")) / steps, 1)
                for table in ("agent_steps", "reward_vectors", "run_agents", "events", "ticks")}
    return {"scenario": scenario, "sets": sets, "ticks": result.ticks, "agent_steps": steps, "wall_s": round(wall, 3),
            "cpu_s": round(cpu, 3), "agent_steps_per_s": round(steps / wall), "agent_steps_per_cpu_s": round(steps / cpu),
            "store_bytes_per_agent_step": round(size / steps, 1), "store_bytes_per_agent_step_by_table": by_table,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}


def _child(scenario: str, sets: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps([scenario, sets])], capture_output=True,
                          text=True, cwd=ROOT, check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000], help="fishers of the commons cases")
    ap.add_argument("--months", type=int, default=12)
    ap.add_argument("--rounds", type=int, default=5, help="paired rounds of the tick timings (median of their ratios)")
    ap.add_argument("--scenarios", nargs="+", default=[s for s in PLAIN if s != "commons"], choices=list(PLAIN))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "engine.json"))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        scenario, sets = json.loads(args.child)
        print(json.dumps(end_to_end(scenario, sets)))
        return
    load = [_load()]
    checked = {s: check(s) for s in ["commons", *args.scenarios]}  # before anything is timed
    print(json.dumps({"reproduced": checked}), flush=True)
    # every end-to-end case first, while this process is small: a child's peak RSS counts the pages it shares with its
    # parent when it is forked
    pairs = {n: commons.timing(n, args.months) for n in args.sizes}
    e2e = {n: _child("commons", pairs[n][0]) for n in args.sizes}
    others = {s: PLAIN[s].timing() for s in args.scenarios}
    e2e_others = {s: _child(s, others[s][0]) for s in args.scenarios}
    load.append(_load())
    cases = []
    for n in args.sizes:
        sets, make, ticks = pairs[n]
        case = {"agents": n, **e2e[n], **tick_rounds("commons", sets, make, ticks, args.rounds, one_by_one=True)}
        print(json.dumps(case), flush=True)
        cases.append(case)
    scenarios = {}
    for s in args.scenarios:
        sets, make, ticks = others[s]
        scenarios[s] = {"end_to_end": e2e_others[s], "reproduced_values": checked[s],
                        **tick_rounds(s, sets, make, ticks, args.rounds)}
        print(json.dumps({s: scenarios[s]}), flush=True)
    load.append(_load())
    out = {"benchmark": "engine", "months": args.months, "rounds": args.rounds,
           "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count(), "load_1min": load},
           "targets": TARGETS, "reproduced": checked, "commons": cases, "scenarios": scenarios,
           "when": time.strftime("%Y-%m-%d %H:%M")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
