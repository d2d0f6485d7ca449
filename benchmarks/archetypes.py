"""Archetype decisions at scale (issue 42 §2): big LLM runs with `llm.archetypes`, and a full vs archetypes pair.

Each run is a `societas run ... --json` subprocess into one SQLite store; per run: wall seconds, CPU seconds of
the process (user + system: on a shared machine the wall time mostly says how busy the others were), peak
resident memory, the load average seen while it ran (1-minute, sampled every 10 s), each tick's seconds, ticks
done, and its `archetype_calls` vs `archetype_decisions`. The pair (the same social run with and without
archetypes) adds `societas compare-runs`'s divergence (docs/archetypes.md), and beside it the divergence of two
full runs that differ only in their seed: the yardstick the pair's number is read against.

    python benchmarks/archetypes.py --out benchmarks/results/archetypes-cpu.json            # the issue's targets
    python benchmarks/archetypes.py --parts social --out benchmarks/results/archetypes-cpu.json   # one part, merged in
    python benchmarks/archetypes.py --social 2000 --social-ticks 2 --fishers 500 --pair 200  # a quick look
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("pair", "seeds", "fishery", "social")


class LoadWatch:
    """The machine's 1-minute load average, sampled every `every` seconds while a run goes on (min, mean, max)."""

    def __init__(self, every: float = 10.0) -> None:
        self.every, self.seen, self._stop = every, [os.getloadavg()[0]], threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            self.seen.append(os.getloadavg()[0])

    def __enter__(self) -> "LoadWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self.seen.append(os.getloadavg()[0])

    def summary(self) -> dict[str, float]:
        return {"min": round(min(self.seen), 2), "mean": round(sum(self.seen) / len(self.seen), 2),
                "max": round(max(self.seen), 2)}


def societas(args: list[str], db: str, nice: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run `societas ARGS --db DB --json` in a child process (at niceness `nice`): its JSON and what it cost."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    cmd = ["nice", "-n", str(nice), sys.executable, "-m", "societas.cli", *args, "--db", db, "--json"]
    with LoadWatch() as load:
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr.strip().splitlines()[-1:]}")
    cost = {"wall_s": round(wall, 1), "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "peak_rss_mb": round(after.ru_maxrss / 1024, 1),  # (the largest child so far)
            "load_1m": load.summary()}
    return json.loads(proc.stdout), cost


def tick_seconds(db: str, run_id: str) -> list[float]:
    """Each stored tick's seconds (the store's `ticks.duration_s`)."""
    with sqlite3.connect(db.removeprefix("sqlite:///")) as con:
        return [round(s, 1) for (s,) in con.execute("select duration_s from ticks where run_id = ? order by tick", (run_id,))]


def calls_by_phase(db: str, run_id: str) -> dict[str, int]:
    """The run's stored LLM calls (one a bucket with archetypes), by phase."""
    with sqlite3.connect(db.removeprefix("sqlite:///")) as con:
        return dict(con.execute("select phase, count(*) from llm_calls where run_id = ? group by phase", (run_id,)).fetchall())


def llm_run(scenario: str, sets: list[str], db: str, archetypes: bool = True, seed: int = 0, nice: int = 0) -> dict[str, Any]:
    """One LLM run of `scenario`: its cost, ticks, status, calls and decisions."""
    args = ["run", scenario, "--policy", "llm", "--seed", str(seed), *(a for s in sets for a in ("--set", s)),
            "--set", f"llm={json.dumps({'archetypes': archetypes})}"]
    got, cost = societas(args, db, nice)
    m = got["metrics"]
    return {"scenario": scenario, "set": sets, "seed": seed, "archetypes": archetypes, "run_id": got["run_id"],
            "status": got["status"], "ticks": got["ticks"], **cost, "tick_s": tick_seconds(db, got["run_id"]),
            "calls": m.get("archetype_calls"), "decisions": m.get("archetype_decisions"),
            "calls_by_phase": calls_by_phase(db, got["run_id"])}


def compare(a: str, b: str, db: str) -> dict[str, Any]:
    """`societas compare-runs A B --json`."""
    return json.loads(subprocess.run(
        [sys.executable, "-m", "societas.cli", "compare-runs", a, b, "--db", db, "--json"],
        cwd=ROOT, capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default=",".join(PARTS), help=f"which runs, comma-separated: {', '.join(PARTS)}")
    parser.add_argument("--social", type=int, default=100_000, help="members of the big social run")
    parser.add_argument("--social-ticks", type=int, default=10)
    parser.add_argument("--fishers", type=int, default=10_000, help="fishers of the big fishery run")
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--pair", type=int, default=2_000, help="members of the full vs archetypes social pair")
    parser.add_argument("--pair-ticks", type=int, default=10)
    parser.add_argument("--nice", type=int, default=0, help="niceness of the runs (0: as this process)")
    parser.add_argument("--db", default=None, help="keep the runs in this SQLite file (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=None, help="write the results here (JSON; the parts not run are kept)")
    a = parser.parse_args()
    parts = [p.strip() for p in a.parts.split(",") if p.strip()]
    if unknown := set(parts) - set(PARTS):
        parser.error(f"unknown parts {sorted(unknown)} (known: {', '.join(PARTS)})")
    result: dict[str, Any] = json.loads(a.out.read_text()) if a.out and a.out.exists() else {}
    result["machine"] = {"cpus": os.cpu_count(), "platform": platform.platform()}
    result["date"] = time.strftime("%Y-%m-%d")
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{a.db or f'{tmp}/runs.db'}"
        pair_sets = [f"agents={a.pair}", f"ticks={a.pair_ticks}"]
        if "pair" in parts or "seeds" in parts:
            full = llm_run("social", pair_sets, db, archetypes=False, nice=a.nice)
        if "pair" in parts:
            arch = llm_run("social", pair_sets, db, archetypes=True, nice=a.nice)
            got = compare(arch["run_id"], full["run_id"], db)
            result["pair"] = {"runs": [arch, full], "divergence": got["divergence"], "metrics": got["metrics"],
                              "ticks": got["ticks"]}
        if "seeds" in parts:  # the yardstick: two full runs that differ only in their seed
            other = llm_run("social", pair_sets, db, archetypes=False, seed=1, nice=a.nice)
            got = compare(other["run_id"], full["run_id"], db)
            result["seeds"] = {"runs": [full, other], "divergence": got["divergence"], "metrics": got["metrics"],
                               "ticks": got["ticks"]}
        if "fishery" in parts:
            # the fishery's lake holds 20 tons a fisher (as the 5-fisher default: 100 tons); collapse_below=0 keeps the
            # run going its 12 months once the lake is fished out (SmolLM2's fishers empty it in month 1 at this size)
            result["fishery"] = llm_run("commons", [f"fishers={a.fishers}", f"months={a.months}",
                                                    f"capacity={20 * a.fishers}", "collapse_below=0"], db, nice=a.nice)
        if "social" in parts:
            result["social"] = llm_run("social", [f"agents={a.social}", f"ticks={a.social_ticks}"], db, nice=a.nice)
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
