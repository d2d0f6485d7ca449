"""Archetype decisions at scale (issue 42 §2): big LLM runs with `llm.archetypes`, and a full vs archetypes pair.

Each run is a `societas run ... --json` subprocess into one SQLite store; per run: wall seconds, CPU seconds of
the process (user + system: on a shared machine the wall time mostly says how busy the others were), peak
resident memory, ticks done, and its `archetype_calls` vs `archetype_decisions`. The pair (the same social run
with and without archetypes) adds `societas compare-runs`'s divergence (docs/archetypes.md).

    python benchmarks/archetypes.py --out benchmarks/results/archetypes-cpu.json            # the issue's targets
    python benchmarks/archetypes.py --social 2000 --social-ticks 2 --fishers 500 --pair 200  # a quick look
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def societas(args: list[str], db: str) -> tuple[dict[str, Any], dict[str, float]]:
    """Run `societas ARGS --db DB --json` in a child process at low priority: its JSON and what it cost."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    cmd = ["nice", sys.executable, "-m", "societas.cli", *args, "--db", db, "--json"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr.strip().splitlines()[-1:]}")
    cost = {"wall_s": round(wall, 1), "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1),
            "peak_rss_mb": round(after.ru_maxrss / 1024, 1)}  # (the largest child so far: runs go smallest first)
    return json.loads(proc.stdout), cost


def llm_run(scenario: str, sets: list[str], db: str, archetypes: bool = True) -> dict[str, Any]:
    """One LLM run of `scenario`: its cost, ticks, status, calls and decisions."""
    args = ["run", scenario, "--policy", "llm", *(a for s in sets for a in ("--set", s)),
            "--set", f"llm={json.dumps({'archetypes': archetypes})}"]
    got, cost = societas(args, db)
    m = got["metrics"]
    return {"scenario": scenario, "set": sets, "archetypes": archetypes, "run_id": got["run_id"],
            "status": got["status"], "ticks": got["ticks"], **cost,
            "calls": m.get("archetype_calls"), "decisions": m.get("archetype_decisions")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--social", type=int, default=100_000, help="members of the big social run")
    parser.add_argument("--social-ticks", type=int, default=10)
    parser.add_argument("--fishers", type=int, default=10_000, help="fishers of the big fishery run")
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--pair", type=int, default=2_000, help="members of the full vs archetypes social pair")
    parser.add_argument("--pair-ticks", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="write the results here (JSON)")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = f"sqlite:///{tmp}/runs.db"
        pair = [llm_run("social", [f"agents={a.pair}", f"ticks={a.pair_ticks}"], db, archetypes=on) for on in (True, False)]
        compared = json.loads(subprocess.run(
            [sys.executable, "-m", "societas.cli", "compare-runs", pair[0]["run_id"], pair[1]["run_id"], "--db", db, "--json"],
            cwd=ROOT, capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)}).stdout)
        # the fishery's lake holds 20 tons a fisher (as the 5-fisher default: 100 tons); collapse_below=0 keeps the
        # run going its 12 months once the lake is fished out (SmolLM2's fishers empty it in month 1 at this size)
        fishery = llm_run("commons", [f"fishers={a.fishers}", f"months={a.months}", f"capacity={20 * a.fishers}",
                                      "collapse_below=0"], db)
        social = llm_run("social", [f"agents={a.social}", f"ticks={a.social_ticks}"], db)
    result = {"machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "load_1m": os.getloadavg()[0]},
              "pair": {"runs": pair, "divergence": compared["divergence"], "metrics": compared["metrics"],
                       "ticks": compared["ticks"]},
              "fishery": fishery, "social": social}
    text = json.dumps(result, indent=2)
    print(text)
    if a.out:
        a.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
