"""Probe benchmark: does a validity probe's cost grow with the world's population?

    python benchmarks/probe_scale.py [--sizes 5,100000,1000000] [--whole 5,100000] [--seeds 10]
                                     [--out benchmarks/results/probe_scale-cpu.json]

`societas probe commons` once built the whole fishery for each of its requests: 3 levels x seeds, plus one per
level to check the config, so 33 fisheries of 100,000 fishers for 30 requests (144 s). The fishery's probe now
builds one fisher whose situation states the population's size (scenarios/commons/probes.py; the tests check
its request equals the whole fishery's). Per size this times, with the scripted `sustainable` fishers and no
store (the decisions are the same either way):

- `probe_s`: the probe as it runs now (`runner.probing.probe_once`, its controls included);
- `whole_world_s` (sizes in --whole): the same probe with its smaller world switched off, i.e. building the
  whole fishery per request as before (skipped at sizes where that takes minutes);
- `ratio`: whole_world_s / probe_s, both measured in this one process.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents.scripted import ScriptedBackend  # noqa: E402
from scenarios.commons.probes import CATCH_BY_STOCK  # noqa: E402
from scenarios.registry import get_scenario  # noqa: E402
from runner.config import build_spec, validate_config  # noqa: E402
from runner.probing import probe_once  # noqa: E402
from sim.tick.broker import DecisionBroker  # noqa: E402


def timed(probe, fishers: int, seeds: int) -> tuple[float, dict]:
    cls = get_scenario("commons")
    spec = build_spec("commons", policy="scripted", sets=[f"fishers={fishers}"])
    config = validate_config(cls.Config, {**spec.config, **dict(probe.config)})
    broker = DecisionBroker({"scripted": ScriptedBackend(cls.strategies)})
    t = time.perf_counter()
    result, _ = probe_once(cls, probe, config, spec, seeds, broker)
    return time.perf_counter() - t, {"means": result.means, "effect": result.effect, "valid": result.valid}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="5,100000,1000000")
    ap.add_argument("--whole", default="5,100000", help="sizes at which the whole-world probe is timed too")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "probe_scale-cpu.json"))
    args = ap.parse_args()
    whole = {int(x) for x in args.whole.split(",") if x}
    rows = []
    for n in (int(x) for x in args.sizes.split(",")):
        probe_s, got = timed(CATCH_BY_STOCK, n, args.seeds)
        row = {"fishers": n, "seeds": args.seeds, "requests": 3 * args.seeds, "probe_s": round(probe_s, 3), **got}
        if n in whole:
            whole_s, same = timed(dataclasses.replace(CATCH_BY_STOCK, world=None), n, args.seeds)
            row.update(whole_world_s=round(whole_s, 3), ratio=round(whole_s / probe_s, 1), same_answers=same == got)
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = {"machine": platform.platform(), "python": platform.python_version(), "when": str(date.today()),
           "benchmark": "probe_scale", "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
