"""The learning interfaces' speed: env steps per second against `societas run`, rollouts per second, and
training steps per minute.

1. env vs run: the fishery with N fishers for M months, the focal fisher answered by a constant policy
   through the PettingZoo env (`sim.env`, one env step a month), against the same fishery with that
   fisher scripted (`fixed`, the same catch) run as `societas run` does (`runner.execution.execute`),
   both stored in SQLite (the env's ticks committed 10 at a time, its default `commit_every`; the run's one by
   one); paired rounds (benchmarks/timing.py), the ratio measured in one run. A third arm,
   `seat`, is the run with the focal fisher an LLM agent answered in the process (a constant LLM behind the
   store's cache, as `societas run` plays an LLM fisher): `env_over_seat` is the env's own cost (its thread
   and bridge), `seat_over_run` the cost of an LLM seat in the fishery (its prompt, its call record, the
   fishers observed one by one). Each arm's process CPU seconds (both
   threads) are kept beside its wall seconds: on a shared, loaded machine the wall ratio mostly measures
   the scheduler (a thread handoff waits for a core), the CPU ratio the work; `*_best` are the ratios of each arm's
   fastest round (contention only adds time, so under load the minima are the steadier reading).
2. rollouts: `rollout_runs` of a scripted run (random catches) at tick 3, k = 8; rollouts per second.
3. training: `examples/train_commons.py`'s loop (LoRA, group-relative policy gradient) with a group of 4
   two-month episodes; steps per minute (model loading excluded). `--skip-training` leaves it out.

    python benchmarks/env.py [--fishers 20] [--months 50] [--repeat 7] [--skip-training]

Writes benchmarks/results/env-cpu.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "examples"))

from timing import rounds  # noqa: E402

from sim.env import parallel_env  # noqa: E402
from agents.llm.base import Answer  # noqa: E402
from runner.backends import make_backends  # noqa: E402
from runner.config import build_spec  # noqa: E402
from scenarios.commons.model import CommonsModel  # noqa: E402
from runner.execution import execute  # noqa: E402
from runner.rollouts import rollout_runs  # noqa: E402
from sim.store.store import Store  # noqa: E402

CATCH = 2.0


def population(fishers: int, focal: str) -> list[dict]:
    return [{"count": 1, "policy": focal, **({"strategy": "fixed"} if focal == "scripted" else {})},
            {"count": fishers - 1, "policy": "scripted", "strategy": "fixed"}]


def env_episode(store: Store, fishers: int, months: int) -> int:
    env = parallel_env("commons", db=store, fishers=fishers, months=months, catch=CATCH,
                       population=population(fishers, "llm"))
    env.reset(seed=1)
    steps = 0
    while env.agents:
        env.step({a: CATCH for a in env.agents})
        steps += 1
    env.close()
    return steps


def run_episode(store: Store, fishers: int, months: int) -> None:
    spec = build_spec("commons", seed=1, overrides={"fishers": fishers, "months": months, "catch": CATCH,
                                                    "population": population(fishers, "scripted")})
    execute(spec, store)


class ConstantLLM:
    """An LLM that answers every request with the benchmark's catch, in the process."""

    model_id, sampling = "constant", {}

    def answer(self, requests, messages):
        return [Answer(CATCH, raw=f"{CATCH:g}") for _ in requests]


def seat_episode(store: Store, fishers: int, months: int) -> None:
    spec = build_spec("commons", seed=1, overrides={"fishers": fishers, "months": months, "catch": CATCH,
                                                    "population": population(fishers, "llm")})
    execute(spec, store, backends=make_backends(spec, CommonsModel, store, llm_factory=ConstantLLM))


def timed(fn, cpu: list[float]):
    """A timer for `rounds`: the call's wall seconds, its process CPU seconds (every thread's) appended to `cpu`."""
    def timer() -> float:
        w, c = time.perf_counter(), time.process_time()
        fn()
        cpu.append(time.process_time() - c)
        return time.perf_counter() - w
    return timer


def training_steps_per_minute(iterations: int = 3) -> dict:
    import torch

    import train_commons as tc

    model, tok = tc.load_policy(8)
    sampler = tc.Sampler(model, tok)
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=5e-4)
    gen = torch.Generator().manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/train.db")
        seconds = []
        for it in range(iterations):
            t0 = time.perf_counter()
            got = tc.episodes(sampler, tok, seed=it, group=4, months=2, db=store, gen=gen)
            returns = torch.tensor([r for r, _, _ in got], dtype=torch.float64)
            adv = (returns - returns.mean()) / (returns.std(unbiased=False) + 1e-8)
            rows = [(p, picks, masks, float(adv[e])) for e, (_, ds, _) in enumerate(got) for p, picks, masks in ds]
            opt.zero_grad()
            lp = sampler.log_probs([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
            (-(torch.tensor([r[3] for r in rows]) * lp).mean()).backward()
            opt.step()
            seconds.append(time.perf_counter() - t0)
    return {"group": 4, "months": 2, "decisions_per_step": 8, "step_seconds": seconds,
            "steps_per_minute": 60.0 / statistics.median(seconds)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--fishers", type=int, default=20)
    p.add_argument("--months", type=int, default=50)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--skip-training", action="store_true")
    a = p.parse_args()
    out: dict = {"machine": platform.processor() or platform.machine(), "python": platform.python_version(),
                 "fishers": a.fishers, "months": a.months}
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/bench.db")
        cpu: dict[str, list[float]] = {"env": [], "seat": [], "run": []}
        times = rounds({"env": timed(lambda: env_episode(store, a.fishers, a.months), cpu["env"]),
                        "seat": timed(lambda: seat_episode(store, a.fishers, a.months), cpu["seat"]),
                        "run": timed(lambda: run_episode(store, a.fishers, a.months), cpu["run"])}, a.repeat)
        env_s, seat_s, run_s = (statistics.median(times[k]) for k in ("env", "seat", "run"))
        env_c, seat_c, run_c = (statistics.median(cpu[k]) for k in ("env", "seat", "run"))
        out["env_vs_run"] = {"env_seconds": times["env"], "seat_seconds": times["seat"], "run_seconds": times["run"],
                             "env_cpu_seconds": cpu["env"], "seat_cpu_seconds": cpu["seat"], "run_cpu_seconds": cpu["run"],
                             "env_steps_per_second": a.months / env_s, "run_ticks_per_second": a.months / run_s,
                             "env_over_run": env_s / run_s, "env_over_seat": env_s / seat_s, "seat_over_run": seat_s / run_s,
                             "env_cpu_over_run": env_c / run_c, "env_cpu_over_seat": env_c / seat_c,
                             "seat_cpu_over_run": seat_c / run_c,
                             # the fastest round of each arm: contention only adds CPU (cache misses, a migrated
                             # thread), so on a loaded machine the minima's ratio is the steadier reading of the work
                             "env_cpu_over_run_best": min(cpu["env"]) / min(cpu["run"]),
                             "env_over_run_best": min(times["env"]) / min(times["run"])}
        parent = execute(build_spec("commons", seed=4, sets=["strategy=random"]), store).run_id
        t0 = time.perf_counter()
        made = rollout_runs(store, parent, 3, 8)
        took = time.perf_counter() - t0
        out["rollouts"] = {"k": len(made), "seconds": took, "rollouts_per_second": len(made) / took,
                           "ticks_each": made[0].ticks}
    if not a.skip_training:
        out["training"] = training_steps_per_minute()
    path = ROOT / "benchmarks" / "results" / "env-cpu.json"
    path.write_text(json.dumps(out, indent=2))
    print(json.dumps({k: v for k, v in out.items()}, indent=2, default=str)[:3000])


if __name__ == "__main__":
    main()
