"""This checkout against another revision, in one run: is the engine (or the LLM path) any slower?

Checks the other revision out into a temporary git worktree and times the same work in both, in fresh
subprocesses taken in turns (each side first in turn, `--rounds` rounds), so that a slow spell of the
machine falls on both sides of every ratio:

- `tick-N`: the scripted commons of N fishers (random catches, 12 months) without the store, the
  best of 3 runs in each subprocess (what benchmarks/engine.py compares with plain Mesa);
- `store-N`: the same run end to end into a fresh SQLite file (agent-steps per second);
- `market-N`: a scripted synthetic market of N customers and 3N businesses (lexical search) end to end into a
  fresh SQLite file (`--market 1000 10000`: how the cost grows with the market's size on each side);
- `llm`: a commons of 32 LLM fishers on the embedded model for 3 months into a fresh store (no cache),
  the model loaded before the clock starts (`--llm` to include it: minutes on a CPU).

Each figure is reported per side (median seconds) with the ratio this / other of every round and their
median; a ratio above 1 means this checkout is slower. `result` holds what each side computed (ticks run, or
the market's welfare), which should agree.

    python benchmarks/versus.py --base HEAD~1 [--sizes 1000 10000] [--rounds 5] [--market 1000 10000] [--llm]
                                [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# what a subprocess runs, against whichever checkout is first on its sys.path: the engine's modules
# moved in the redesign, so it finds them under either layout
PROBE = r'''
import json, math, sys, tempfile, time
from pathlib import Path
kind, n = sys.argv[1], int(sys.argv[2])
try:
    from runner.config import build_spec
    from runner.execution import execute
    from sim.store.store import Store
    from sim.tick.broker import DecisionBroker
except ImportError:  # the layout before the redesign
    from sim.config import build_spec
    from runner import execute
    from sim.store import Store
    from sim.broker import DecisionBroker
from agents.scripted import ScriptedBackend
from scenarios import get_scenario

def sets(n, months):
    return [f"fishers={n}", f"months={months}", "strategy=random", f"capacity={20 * n}", "collapse_below=0"]

if kind == "tick":
    cls = get_scenario("commons")
    spec = build_spec("commons", sets=sets(n, 12), seed=1)
    best = math.inf
    for _ in range(3):
        model = cls(cls.Config.model_validate(spec.config), seed=1,
                    broker=DecisionBroker({"scripted": ScriptedBackend(cls.strategies)}))
        started = time.perf_counter()
        while model.running and model.tick < 12:
            model.step()
        best = min(best, time.perf_counter() - started)
    print(json.dumps({"seconds": best}))
elif kind == "store":
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'runs.db'}")
        spec = build_spec("commons", sets=sets(n, 12), seed=1)
        started = time.perf_counter()
        result = execute(spec, store)
        print(json.dumps({"seconds": time.perf_counter() - started, "agent_steps": n * result.ticks}))
elif kind == "market":
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'runs.db'}")
        spec = build_spec("market", sets=[f"customers_n={n}", f"businesses_n={3 * n}", "search=lexical"], seed=0)
        started = time.perf_counter()
        result = execute(spec, store)
        print(json.dumps({"seconds": time.perf_counter() - started, "ticks": result.ticks,
                          "welfare": result.metrics["welfare"]}))
else:  # llm
    try:
        from agents.llm.local.model import shared_lm
    except ImportError:
        from agents.llm.local import shared_lm
    shared_lm()  # the model loads before the clock starts
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{Path(tmp) / 'runs.db'}")
        spec = build_spec("commons", sets=[f"fishers={n}", "months=3", f"capacity={100 * n}", "collapse_below=0"], seed=2,
                          policy="llm")
        started = time.perf_counter()
        result = execute(spec, store)
        print(json.dumps({"seconds": time.perf_counter() - started, "ticks": result.ticks}))
'''


def probe(tree: Path, kind: str, n: int) -> dict:
    """Run the probe against `tree` in a fresh process; its figures.

    `python -S` with the environment's site-packages after `tree` on the path: the editable install's
    import hook (a .pth file) is not loaded, so nothing of this checkout leaks into the other's process.
    """
    libs = dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    path = os.pathsep.join([str(tree), *libs])
    proc = subprocess.run([sys.executable, "-S", "-c", PROBE, kind, str(n)], cwd=tree, capture_output=True, text=True,
                          env={"PYTHONPATH": path, "PATH": "/usr/bin:/bin", "HOME": str(Path.home()),
                               "HF_HUB_OFFLINE": "1"}, timeout=1800)
    if proc.returncode:
        raise RuntimeError(f"probe {kind} {n} failed in {tree}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", default="HEAD~1", help="the revision to compare with (default HEAD~1)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--market", type=int, nargs="*", default=[], help="market sizes (customers; businesses = 3x)")
    ap.add_argument("--llm", action="store_true", help="also time 32 LLM fishers for 3 months (minutes on a CPU)")
    ap.add_argument("--out", type=Path, default=None, help="write the results as JSON here")
    args = ap.parse_args()
    rev = subprocess.run(["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    here = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()
    cases = [("tick", n) for n in args.sizes] + [("store", n) for n in args.sizes] + [("market", n) for n in args.market] \
        + ([("llm", 32)] if args.llm else [])
    with tempfile.TemporaryDirectory(prefix="societas-versus-") as tmp:
        other = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(other), rev], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            results = {}
            for kind, n in cases:
                times: dict[str, list[float]] = {"this": [], "other": []}
                ticks: dict[str, object] = {}
                for k in range(args.rounds):
                    order = [("this", ROOT), ("other", other)]
                    for side, tree in (order if k % 2 == 0 else order[::-1]):
                        got = probe(tree, kind, n)
                        times[side].append(got["seconds"])
                        ticks.setdefault(side, got.get("welfare", got.get("ticks")))
                ratios = [a / b for a, b in zip(times["this"], times["other"])]
                results[f"{kind}-{n}"] = {
                    "this_s": round(statistics.median(times["this"]), 4),
                    "other_s": round(statistics.median(times["other"]), 4),
                    "ratio_this_over_other": round(statistics.median(ratios), 3),
                    "round_ratios": [round(r, 3) for r in ratios], "result": ticks}
                print(f"{kind}-{n}: this {results[f'{kind}-{n}']['this_s']}s, {rev} {results[f'{kind}-{n}']['other_s']}s, "
                      f"ratio {results[f'{kind}-{n}']['ratio_this_over_other']} (rounds {results[f'{kind}-{n}']['round_ratios']})",
                      flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, capture_output=True)
    report = {"this": here, "other": rev, "rounds": args.rounds, "machine": platform.machine(),
              "python": platform.python_version(), "results": results}
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
