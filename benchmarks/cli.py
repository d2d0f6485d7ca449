"""CLI benchmark: how long each `societas` command takes as a whole process, against `python -c pass`.

A researcher runs `list`, `show` and `export` dozens of times a day, and the tests start the CLI
about a hundred times: what a command costs before it does anything is mostly its imports. Each
command runs in a fresh process on a small store (one scripted run of 3 ticks and a sweep of two
runs), in paired rounds with `python -c pass` (each round runs every command once, the first place
passing on each round, so a slow spell of the shared machine falls on every side of a ratio).

Per command: the median wall seconds, the median of the rounds' ratios to `python -c pass` (ratios
only mean something within one run), the median CPU seconds and peak RSS of the process, and which
heavy libraries it imported (read from `python -X importtime`).

    python benchmarks/cli.py [--rounds 7] [--out benchmarks/results/cli-cpu.json]
"""

from __future__ import annotations

import argparse
import json
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

#: libraries whose import a command pays for: the model, the world, frames, statistics, the database, migrations
HEAVY = ("torch", "transformers", "mesa", "pandas", "scipy", "pyarrow", "sqlalchemy", "alembic")
#: issue 38's targets on an idle 2-core machine (wall seconds; a shared machine is rarely idle: the CPU seconds of
#: the process, one thread, are what its wall would be there)
TARGETS = {"--version": 0.3, "--help": 0.3, "list": 1.0, "show": 1.0, "sweep-status": 1.0}
SWEEP = "scenario: commons\npolicy: scripted\nticks: 2\ngrid: {regrowth: [2.0]}\nseeds: [0, 1]\n"


def environment() -> dict[str, str]:
    """This checkout first on the path, a fixed terminal width, Python's default warning filters."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    env.update(PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p), COLUMNS="120")
    return env


def societas(*args: str) -> list[str]:
    return [sys.executable, "-m", "societas.cli", *args]


def make_store(folder: Path) -> tuple[str, str, str]:
    """A small store: (its URL, the id of a scripted commons run of 3 ticks, the id of a sweep of two runs)."""
    url = f"sqlite:///{folder / 'runs.db'}"
    run = subprocess.run(societas("run", "commons", "--ticks", "3", "--json", "--db", url), capture_output=True, text=True,
                         cwd=folder, env=environment(), check=True)
    (folder / "sweep.yaml").write_text(SWEEP)
    sweep = subprocess.run(societas("sweep", "sweep.yaml", "--workers", "1", "--json", "--db", url), capture_output=True,
                           text=True, cwd=folder, env=environment(), check=True)
    return url, json.loads(run.stdout)["run_id"], json.loads(sweep.stdout)["sweep_id"]


def commands(url: str, run_id: str, sweep_id: str, out_dir: Path) -> dict[str, list[str]]:
    """What is timed, by name: the baseline first."""
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "--version": societas("--version"),
        "--help": societas("--help"),
        "run --help": societas("run", "--help"),
        "scenarios": societas("scenarios"),
        "list": societas("list", "--db", url),
        "show": societas("show", run_id, "--db", url),
        "sweep-status": societas("sweep-status", sweep_id, "--db", url),
        "export": societas("export", run_id, "--format", "csv", "--out", str(out_dir), "--db", url),
    }


def timed(argv: list[str], cwd: Path, usage: list[tuple[float, float]]) -> float:
    """Run `argv` to the end (output thrown away); append its (CPU seconds, peak RSS MiB); return its wall seconds."""
    with tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, cwd=cwd, env=environment(), stdout=subprocess.DEVNULL, stderr=err)
        _, status, rusage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here (with its rusage): Popen must not wait again
        if proc.returncode != 0:
            err.seek(0)
            raise SystemExit(f"{' '.join(argv[2:])} exited {proc.returncode}: {err.read().decode(errors='replace')[-500:]}")
    usage.append((rusage.ru_utime + rusage.ru_stime, rusage.ru_maxrss / 1024))
    return wall


def heavy_imports(argv: list[str], cwd: Path) -> list[str]:
    """The libraries of `HEAVY` that the command imports (`python -X importtime`)."""
    if argv[1:3] != ["-m", "societas.cli"]:
        return []
    proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], cwd=cwd, env=environment(), capture_output=True,
                          text=True)
    names = {line.rpartition("|")[2].strip().split(".")[0] for line in proc.stderr.splitlines()
             if line.startswith("import time:")}
    return [h for h in HEAVY if h in names]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=7, help="paired rounds (medians over them)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "cli-cpu.json"))
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        url, run_id, sweep_id = make_store(folder)
        cmds = commands(url, run_id, sweep_id, folder / "export")
        usage: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
        timers = {name: (lambda argv=argv, name=name: timed(argv, folder, usage[name])) for name, argv in cmds.items()}
        for timer in timers.values():  # a warm-up of each (the file cache, Python's bytecode)
            timer()
        for runs in usage.values():
            runs.clear()
        times = paired_rounds(timers, args.rounds)
        loads = {name: heavy_imports(argv, folder) for name, argv in cmds.items()}
    base = times["python -c pass"]
    results = {}
    for name, walls in times.items():
        row = {"wall_s": round(statistics.median(walls), 3), "wall_s_min": round(min(walls), 3),
               "vs_python": round(statistics.median(w / b for w, b in zip(walls, base)), 1),
               "cpu_s": round(statistics.median(u for u, _ in usage[name]), 3),
               "peak_rss_mib": round(statistics.median(m for _, m in usage[name]), 1), "imports": loads[name]}
        if name in TARGETS:  # wall as measured here; CPU time: what one thread takes on an idle machine
            row["target_s"] = TARGETS[name]
            row["wall_meets_target"] = row["wall_s"] <= TARGETS[name]
            row["cpu_meets_target"] = row["cpu_s"] <= TARGETS[name]
        results[name] = row
        print(f"{name:16s} {row['wall_s']:7.3f} s  x{row['vs_python']:<6} cpu {row['cpu_s']:.3f} s  "
              f"{row['peak_rss_mib']:6.1f} MiB  {' '.join(loads[name])}", flush=True)
    out = {"benchmark": "cli", "date": time.strftime("%Y-%m-%d"), "rounds": args.rounds,
           "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count()},
           "load_average_1min": {"before": round(load_before, 2), "after": round(os.getloadavg()[0], 2)},
           "store": "one scripted commons run of 3 ticks and a scripted sweep of 2 runs (SQLite)",
           "how": "each command a fresh process (`python -m societas.cli ...`), paired rounds with `python -c pass`; "
                  "wall_s: median; vs_python: median of the rounds' ratios; cpu_s and peak_rss_mib: medians",
           "commands": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
