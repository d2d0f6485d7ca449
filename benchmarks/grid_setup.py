"""Benchmark of a grid world's set-up against its size; writes benchmarks/results/grid_setup-cpu.json.

A square Gathering map of side 100 to 500 (the largest a config accepts: `scenarios.grid.maps.MAX_CELLS`), open
cells with apples (5%) and spawn points (30%), 100 scripted agents: the seconds to build the model (parse the map,
the Mesa grid, the adjacency), to place the agents (the first step) and to run two more steps, and the process's
peak memory. Set-up was quadratic in spawn points (300 x 300: 264 s for three steps); it grows with the cells now.

    python benchmarks/grid_setup.py
"""

from __future__ import annotations

import json
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIDES = (100, 200, 300, 400, 500)

CHILD = """
import json, sys, time, resource
sys.path.insert(0, {root!r}); sys.path.insert(0, {tests!r})
from conftest import scripted_model
import agents.scripted, scenarios, runner.config, sim.tick.broker  # imported before the clock starts
t0 = time.perf_counter()
model = scripted_model("gathering", sets=["map={path}", "agents=100", "episode_steps=3"], policy="scripted")
t1 = time.perf_counter()
model.step()
t2 = time.perf_counter()
model.step(); model.step()
t3 = time.perf_counter()
print(json.dumps({{"build_s": t1 - t0, "place_s": t2 - t1, "two_steps_s": t3 - t2,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def square_map(side: int, seed: int = 2) -> str:
    """A walled square map: 5% apples, 30% spawn points, the rest open."""
    r = random.Random(seed)
    inner = ["@" + "".join("A" if r.random() < 0.05 else "P" if r.random() < 0.3 else "." for _ in range(side - 2)) + "@"
             for _ in range(side - 2)]
    return "\n".join(["@" * side, *inner, "@" * side])


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for side in SIDES:
            path = Path(tmp) / f"map{side}.txt"
            path.write_text(square_map(side))
            code = CHILD.format(root=str(ROOT), tests=str(ROOT / "tests"), path=path)
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
            got = json.loads(out.stdout.strip().splitlines()[-1])
            rows.append({"side": side, "cells": side * side, **{k: round(v, 3) for k, v in got.items()}})
            print(rows[-1], flush=True)
    result = {"benchmark": "grid_setup", "machine": platform.processor() or platform.machine(),
              "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"), "agents": 100, "rows": rows,
              "note": "build_s: config validation (the map parsed) and the model (Mesa grid, adjacency), imports excluded; "
                      "place_s: the first step (agents placed, then one step); peak_mb: the whole process"}
    out = ROOT / "benchmarks" / "results" / "grid_setup-cpu.json"
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
