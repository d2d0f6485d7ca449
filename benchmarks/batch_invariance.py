"""What a batch-invariant engine costs: this checkout's embedded engine against another checkout's (`--before`, e.g.
a `git worktree` of main), on the same requests, taking turns in one run. Writes JSON.

    python benchmarks/batch_invariance.py --before ../main [--rounds 3] [--out benchmarks/results/batch_invariance-cpu.json]

The work is a social-like call: 16 Text (24 tokens, sampled), 16 Number and 16 Choice requests over two situations
(two prefix groups) of varying lengths, answered in one call, then in two calls of half the requests, then 8 of them
one by one. Each checkout runs in a process of its own (its own modules, the same model and threads), the two
answering in turns, each side first in turn; the JSON holds the median seconds of each part per side, their ratio,
and how many answers differ between one call and two (the invariance this checkout buys).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

WORKER = r'''
import json, sys, time
import torch
from agents.llm.local.llm import LocalLLM
from agents.llm.local.model import shared_lm
from agents.llm.prompts import render_messages
from sim.core.contracts import DecisionRequest
from sim.core.spaces import Choice, Number, Text

SITUATIONS = ["You post on a small social network about city life. The feed shows posts about bikes, rents and parks.",
              "You fish in a lake with others. The lake holds 80 tons and regrows each month."]

def req(agent, kind, situation, filler):
    if kind == "number":
        space, default = Number(0, 80 + agent % 5, 1), 0.0
    elif kind == "choice":
        space, default = Choice(["none", f"member {agent % 4}", "member 9"]), "none"
    else:
        space, default = Text(24), "ok"
    return DecisionRequest(agent_id=agent, tick=1, phase="p", space=space, default=default, backend="llm",
                           context=SITUATIONS[situation] + " It rained." * filler,
                           own_context=f"You are member {agent}. " + "You like bikes. " * (agent % 4),
                           question="What now?", seed=1000 + agent)

kinds = ["text", "number", "choice"]
reqs = [req(i, kinds[i % 3], i % 2, i % 7) for i in range(48)]
msgs = [render_messages(r) for r in reqs]
eng = LocalLLM(lm=shared_lm(threads=int(sys.argv[1])), temperature=0.7)
eng.answer(reqs[:4], msgs[:4])  # warm
for line in sys.stdin:
    out = {}
    t = time.perf_counter(); one = eng.answer(reqs, msgs); out["one_call_s"] = time.perf_counter() - t
    t = time.perf_counter(); two = eng.answer(reqs[:24], msgs[:24]) + eng.answer(reqs[24:], msgs[24:])
    out["two_calls_s"] = time.perf_counter() - t
    t = time.perf_counter(); alone = [eng.answer([r], [m])[0] for r, m in zip(reqs[:8], msgs[:8])]
    out["eight_alone_s"] = time.perf_counter() - t
    out["differ_one_vs_two"] = {k: sum(a.value != b.value for i, (a, b) in enumerate(zip(one, two)) if kinds[i % 3] == k)
                                for k in kinds}
    out["differ_one_vs_alone"] = sum(a.value != b.value for a, b in zip(one[:8], alone))
    print(json.dumps(out), flush=True)
'''


def start(path: Path, threads: int) -> subprocess.Popen:
    """A worker process importing the checkout at `path`."""
    env = dict(os.environ, PYTHONPATH=str(path))
    return subprocess.Popen([sys.executable, "-c", WORKER, str(threads)], cwd=str(path), env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def ask(proc: subprocess.Popen) -> dict:
    """One round of the worker's work: its timings and differences."""
    proc.stdin.write("go\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("a worker ended before answering (see it run alone for its error)")
    return json.loads(line)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="the checkout to compare against (e.g. a git worktree of main)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per worker (the workers take turns)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    before = Path(args.before).resolve()
    if not (before / "agents" / "llm" / "local" / "hf_engine.py").is_file():
        print(f"--before {args.before}: not a societas checkout", file=sys.stderr)
        raise SystemExit(2)
    sides = {"before": start(before, args.threads), "after": start(ROOT, args.threads)}
    rounds: dict[str, list[dict]] = {"before": [], "after": []}
    try:
        for r in range(args.rounds):
            for name in (("before", "after") if r % 2 == 0 else ("after", "before")):
                rounds[name].append(ask(sides[name]))
                print(name, rounds[name][-1], flush=True)
    finally:
        for p in sides.values():
            p.stdin.close()
            p.wait()
    parts = ("one_call_s", "two_calls_s", "eight_alone_s")
    med = {s: {k: statistics.median(x[k] for x in rounds[s]) for k in parts} for s in rounds}
    result = {
        "machine": {"python": platform.python_version(), "processor": platform.processor(), "cpus": os.cpu_count(),
                    "load_1m_at_end": os.getloadavg()[0]},
        "threads": args.threads, "rounds": args.rounds, "median_s": med,
        "after_over_before": {k: med["after"][k] / med["before"][k] for k in parts},
        "differences": {s: rounds[s][-1]["differ_one_vs_two"] | {"one_vs_alone_of_8": rounds[s][-1]["differ_one_vs_alone"]}
                        for s in rounds},
        "raw": rounds,
    }
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
