"""Test-suite benchmark: whole `pytest` commands on one subset, serial against `-n 2` (pytest-xdist), and the CLI
run in the test process (tests/inprocess.py) against a new process per call ($SOCIETAS_TEST_CLI=process).

Decides whether `make test` runs under xdist: it pays only if two workers beat one on this machine's cores. Each
configuration runs once, in the order given, in one session (ratios only mean something within one session); the
load average before and after each is kept, since the machine is shared. Each call adds a session to the JSON file.

    python benchmarks/suite.py [--files tests/test_cli.py ...] [--out benchmarks/results/suite.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: a representative subset: the CLI-heavy files, the store, runs, forks, probes, the tutorial
FILES = ["tests/test_cli.py", "tests/test_adversary.py", "tests/test_hardening.py", "tests/test_replay.py",
         "tests/test_forks.py", "tests/test_bounds.py", "tests/test_learning.py", "tests/test_probes.py",
         "tests/test_conformance.py", "tests/test_cli_inprocess.py", "tests/test_store.py", "tests/test_resume.py",
         "tests/test_tutorial.py", "tests/test_user_scenarios.py", "tests/test_sweep.py"]
#: name -> (extra pytest arguments, extra environment)
CONFIGS = {
    "serial, in-process": ([], {}),
    "-n 2, in-process": (["-n", "2"], {}),
    "-n 2, process": (["-n", "2"], {"SOCIETAS_TEST_CLI": "process"}),
}


def run(files: list[str], args: list[str], env: dict[str, str]) -> dict:
    """One `pytest -m 'not slow'` command: wall seconds, its summary line, the load average around it."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not slow", *args, *files]
    load_before = os.getloadavg()
    started = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **env})
    wall = time.perf_counter() - started
    summary = [line for line in proc.stdout.splitlines() if re.search(r"\d+ (passed|failed)", line)]
    return {"command": " ".join(cmd[1:]), "env": env, "wall_s": round(wall, 1), "exit": proc.returncode,
            "summary": summary[-1].strip("= ") if summary else proc.stdout[-500:],
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in os.getloadavg()]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", nargs="+", default=FILES)
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS), help="in this order")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "suite.json")
    a = parser.parse_args()
    kept = json.loads(a.out.read_text()) if a.out.exists() else {}
    sessions = kept.get("sessions", [])
    session = {"started": time.strftime("%Y-%m-%dT%H:%M:%S"), "files": a.files, "results": {}}
    sessions.append(session)
    for name in a.configs:
        session["results"][name] = run(a.files, *CONFIGS[name])
        print(name, json.dumps(session["results"][name]), flush=True)
        a.out.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                                     "sessions": sessions}, indent=1) + "\n")


if __name__ == "__main__":
    main()
