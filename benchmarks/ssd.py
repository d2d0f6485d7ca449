"""Benchmark of the grid games (Gathering, Cleanup); writes benchmarks/results/ssd-cpu.json.

For each game at 10 and 100 agents: agent-steps per second of the platform (`societas run`'s path: the
tick, the decision layer with scripted strategies, the reward layer and a SQLite store) and of a plain
Mesa reference — a `mesa.Model` that applies the same rules (`scenarios.grid.world`) and the same
strategies to the same world, with no requests, broker, rewards or store — measured in one process, one
after the other, so the ratio is the platform's cost. A synthesis row runs the greedy program through the
sandbox (one process round trip per step). `--long` adds the 10,000-step, 100-agent episode the issue asks
to run.

    python benchmarks/ssd.py              # 1,000 steps per case
    python benchmarks/ssd.py --long       # and one 10,000 x 100 Gathering episode
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import tempfile
import time
from pathlib import Path

import mesa
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scenarios.grid import maps as grid_maps  # noqa: E402
from scenarios.grid.model import CleanupModel, Forager, GatheringModel  # noqa: E402
from scenarios.grid.strategies import STRATEGIES, GridView  # noqa: E402
from scenarios.grid.world import INDEX, GridWorld, Rules  # noqa: E402
from sim.core.contracts import DecisionRequest  # noqa: E402
from sim.core.spaces import Choice  # noqa: E402

CASES = [("gathering", 10, "large"), ("gathering", 100, "huge"), ("cleanup", 10, "large"), ("cleanup", 100, "huge")]


class PlainModel(mesa.Model):
    """The reference: the same world and strategies in a plain Mesa model (agents on the grid, one step per tick)."""

    def __init__(self, game: str, agents: int, map_name: str, strategy: str, seed: int = 0) -> None:
        super().__init__(seed=seed)
        cls = GatheringModel if game == "gathering" else CleanupModel
        cfg = cls.Config(agents=agents, map=map_name)
        holder = type("H", (), {"config": cfg})()
        rules = Rules(beam_length=cfg.beam_length, beam_width=cfg.beam_width, hits_to_tag=cfg.hits_to_tag,
                      timeout_steps=cfg.timeout_steps, **cls._game_rules(holder))
        self.world = GridWorld(grid_maps.load(map_name, cls.maps), rules, agents, self.rng, self.random)
        self.foragers = [Forager(self, "scripted", strategy) for _ in range(agents)]
        self.index = {a.unique_id: i for i, a in enumerate(self.foragers)}
        self.strategy = STRATEGIES[strategy]
        self.cleanup = game == "cleanup"
        self.space = Choice(("stand",))
        self.episode: dict = {}
        self.world.reset()
        self.world.place(self.foragers)

    def step(self) -> None:
        view = GridView(self.world, self.index, {a.unique_id: a.strategy for a in self.foragers}, self.episode, self.cleanup)
        actions = []
        for a in self.foragers:
            req = DecisionRequest(agent_id=a.unique_id, tick=self.steps, phase="act", space=self.space, default="stand",
                                  observation={"view": view})
            actions.append(INDEX[self.strategy(req, random.Random(a.unique_id * 1_000_003 + self.steps))])
        order = list(range(len(self.foragers)))
        self.random.shuffle(order)
        self.world.step(actions, order)
        self.world.place(self.foragers)


def plain(game: str, agents: int, map_name: str, strategy: str, steps: int) -> float:
    model = PlainModel(game, agents, map_name, strategy)
    t = time.perf_counter()
    for _ in range(steps):
        model.step()
    return agents * steps / (time.perf_counter() - t)


def platform_run(game: str, agents: int, map_name: str, strategy: str, steps: int, policy: str = "scripted",
                 extra: tuple[str, ...] = ()) -> tuple[float, dict]:
    from runner.config import build_spec
    from runner.execution import execute
    from sim.store.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(f"sqlite:///{tmp}/b.db")
        spec = build_spec(game, sets=[f"agents={agents}", f"map={map_name}", f"strategy={strategy}",
                                      f"episode_steps={steps}", *extra], policy=policy)
        t = time.perf_counter()
        result = execute(spec, store)
        wall = time.perf_counter() - t
        size = Path(f"{tmp}/b.db").stat().st_size
    return agents * steps / wall, {"wall_s": round(wall, 2), "db_mb": round(size / 2**20, 1), "status": result.status,
                                   "efficiency": result.metrics.get("perolat_efficiency")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--long", action="store_true", help="also one 10,000-step episode of 100 Gathering agents")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "ssd-cpu.json"))
    args = parser.parse_args()
    rows = []
    for game, agents, map_name in CASES:
        for strategy in ("greedy", "cooperative"):
            ref = plain(game, agents, map_name, strategy, args.steps)
            got, info = platform_run(game, agents, map_name, strategy, args.steps)
            rows.append({"game": game, "agents": agents, "map": map_name, "strategy": strategy, "steps": args.steps,
                         "platform_agent_steps_per_s": round(got), "plain_mesa_agent_steps_per_s": round(ref),
                         "platform_over_plain": round(got / ref, 3), **info})
            print(json.dumps(rows[-1]), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        code = Path(tmp) / "greedy.py"
        code.write_text("def policy(obs):\n    return greedy_action(obs)\n")
        for agents, map_name in ((10, "large"), (100, "huge")):
            got, info = platform_run("gathering", agents, map_name, "greedy", args.steps, "synthesis", (f"seed_code={code}",))
            rows.append({"game": "gathering", "agents": agents, "map": map_name, "policy": "synthesis (greedy program)",
                         "steps": args.steps, "platform_agent_steps_per_s": round(got), **info})
            print(json.dumps(rows[-1]), flush=True)
    if args.long:
        got, info = platform_run("gathering", 100, "huge", "greedy", 10_000)
        rows.append({"game": "gathering", "agents": 100, "map": "huge", "strategy": "greedy", "steps": 10_000,
                     "platform_agent_steps_per_s": round(got), **info})
        print(json.dumps(rows[-1]), flush=True)
    out = {"machine": {"python": platform.python_version(), "cpu": platform.processor() or platform.machine(),
                       "mesa": mesa.__version__, "numpy": np.__version__}, "rows": rows}
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
