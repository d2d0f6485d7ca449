"""Values and worlds with bounds: a number is a number (never a bool or a string, wherever it sits), no finite value
overflows a run, a payoff or reward that is not finite stops the run cleanly, grid maps and their agents are bounded,
and a sweep's bad cells (an unknown map) are refused before anything runs."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import cli, scripted_model
from scenarios.commons.model import CommonsModel
from scenarios.grid.maps import MAX_CELLS
from scenarios.registry import REGISTRY
from sim.core.errors import UsageError
from runner.config import build_spec
from runner.execution import RunFailed, execute
from runner.sweeps.spec import load_sweep
from sim.store.store import Store

SMALL = {"commons": ["months=2"], "donor": ["agents=4", "rounds=2", "generations=1"],
         "market": ["customers_n=2", "businesses_n=2", "max_steps=2"], "social": ["agents=10", "ticks=2"],
         "gathering": ["map=small", "agents=2", "episode_steps=2"], "cleanup": ["map=small", "agents=2", "episode_steps=2"]}


# ----- a number is a number ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario", sorted(REGISTRY))
@pytest.mark.parametrize("value, says", [
    ("reward_weights={payoff: true}", "bad value for 'reward_weights.payoff': must be a number, not true"),
    ("reward_weights={payoff: '1'}", "bad value for 'reward_weights.payoff': must be a number, not '1'"),
    ("reward_weights={payoff: 1e308}", "'reward_weights.payoff': must be a number"),  # YAML reads 1e308 as a string
    ("reward_weights={payoff: 1.0e+308, welfare: 1.0e+308}", "'reward_weights.payoff': must be at most 1e+12"),
    ("reward_weights={payoff: -1.0e+13}", "at most 1e+12 in magnitude"),
    ("memory_window=true", "bad value for 'memory_window': must be a number, not true"),
    ("memory_window='8'", "bad value for 'memory_window': must be a number, not '8'"),
    ("lam=.nan", "lam"),
])
def test_what_is_not_a_number_is_refused_in_every_scenario(scenario, value, says):
    """Bools, strings and magnitudes past 1e12 are refused for any number field, nested ones too, in every scenario."""
    with pytest.raises(UsageError, match=says.replace("(", r"\(").replace("+", r"\+")):
        build_spec(scenario, sets=[*SMALL[scenario], value])


@pytest.mark.parametrize("sets, says", [
    (["population=[{count: 5, enter: true}]"], "'population.0.enter': must be a number, not true"),
    (["population=[{count: true}]", "fishers=1"], "'population.0.count': must be a number, not true"),
    (["population=[{count: '5'}]"], "'population.0.count': must be a number, not '5'"),
    (["llm.temperature=true"], "'llm.temperature': must be a number, not true"),
    (["llm.max_retries='2'"], "'llm.max_retries': must be a number"),
    (["sanction_fine=1.0e+300"], "at most 1e+12"),
    (["collapse_below=1.0e+200"], "at most 1e+12"),
])
def test_population_groups_llm_settings_and_unbounded_fields_take_numbers_only(sets, says):
    """A population group's numbers, the LLM's settings and a field without an upper bound obey the same rule."""
    with pytest.raises(UsageError, match=says.replace("+", r"\+")):
        build_spec("commons", sets=sets, policy="llm")


def test_the_issues_overflowing_weights_exit_2_with_one_line_and_store_nothing(db_url, tmp_path):
    """The donor game with weights of 1e308 (written as YAML floats) is bad input: exit 2, one line, no SQL, no run."""
    proc = cli("run", "donor", "--set", "reward_weights={payoff: 1.0e+308, welfare: 1.0e+308}", db=db_url)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "magnitude" in proc.stderr and "INSERT" not in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs.db").exists() or Store(db_url).count_runs() == 0


class InfiniteCommons(CommonsModel):
    """A fishery whose fisher 1 earns an infinite payoff in month 2 (a scenario's own overflow)."""

    name = "infinite_commons"

    def payoffs(self):
        out = super().payoffs()
        if self.tick == 2:
            out[min(out)] = math.inf
        return out


def test_a_payoff_that_is_not_finite_stops_the_run_naming_it(store):
    """A non-finite payoff or reward is never stored: the run fails at that tick, saying which agent and what."""
    with pytest.raises(RunFailed) as info:
        execute(build_spec(InfiniteCommons, sets=["months=4"]), store)
    run = store.get_run(info.value.run_id)
    assert run.status == "failed" and run.ticks == 1 and "agent 1's payoff is inf" in run.reason
    assert all(math.isfinite(s.reward) and math.isfinite(s.payoff) for s in store.steps(run.id))


# ----- worlds with bounds -----------------------------------------------------------------------------------------
def _square(path: Path, side: int, spawn_every: int = 3) -> str:
    rows = ["@" * side] + ["@" + "".join("P" if (r * side + c) % spawn_every == 0 else "." for c in range(side - 2)) + "@"
                           for r in range(side - 2)] + ["@" * side]
    path.write_text("\n".join(rows))
    return str(path)


def test_a_map_past_the_limit_is_refused_naming_it(tmp_path, db_url):
    """A map of more than MAX_CELLS cells is refused before it is built (a 3000 x 3000 map took 6 GB), exit 2."""
    side = int(math.isqrt(MAX_CELLS)) + 1
    big = _square(tmp_path / "big.txt", side)
    with pytest.raises(UsageError, match=f"at most {MAX_CELLS:,} cells"):
        build_spec("gathering", sets=[f"map={big}"])
    huge = tmp_path / "huge.txt"
    huge.write_text(("@" * 3000 + "\n") * 3000)
    proc = cli("run", "gathering", "--set", f"map={huge}", db=db_url)
    assert proc.returncode == 2 and f"{MAX_CELLS:,} cells" in proc.stderr and "Traceback" not in proc.stderr


def test_a_large_map_with_many_spawn_points_sets_up_and_every_agent_has_its_own_cell(tmp_path):
    """A 300 x 300 map with ~30,000 spawn points builds and steps (set-up was quadratic in them); 2,000 agents start
    on 2,000 distinct cells."""
    path = _square(tmp_path / "m300.txt", 300)
    model = scripted_model("cleanup", sets=[f"map={path}", "agents=2000", "episode_steps=2"], policy="scripted")
    model.step()
    assert len({tuple(p) for p in model.world.pos.tolist()}) == 2000


@pytest.mark.parametrize("scenario", ["gathering", "cleanup"])
def test_more_agents_than_start_cells_are_refused(scenario, tmp_path):
    """Cells are exclusive: a map with 109 start cells takes 109 agents, not 110 (10,000 were stacked 96 on a cell)."""
    rows = ["@" * 13, "@P.........@@"] + ["@...........@"] * 9 + ["@" * 13]
    path = tmp_path / "m121.txt"
    path.write_text("\n".join(rows))
    model = scripted_model(scenario, sets=[f"map={path}", "agents=109", "episode_steps=2"], policy="scripted")
    model.step()
    assert len({tuple(p) for p in model.world.pos.tolist()}) == 109
    for n in (110, 10_000):
        with pytest.raises(UsageError, match="at most the map's 109 start cells"):
            build_spec(scenario, sets=[f"map={path}", f"agents={n}"])
    with pytest.raises(UsageError, match="start cells"):
        build_spec(scenario, sets=["map=small", "agents=10000"])


def test_local_stock_counts_the_same_as_the_pairs_it_replaced():
    """Density regrowth's local stock, now a box sum over the map, equals the count over pairs within the radius."""
    model = scripted_model("gathering", sets=["map=commons", "regrowth=density", "agents=2"], policy="scripted")
    world = model.world
    p = world.apple_pos
    rng = np.random.default_rng(0)
    for radius in (1, 2, 5):
        world.rules = dataclasses.replace(world.rules, density_radius=radius)
        d = np.maximum(np.abs(p[:, None, 0] - p[None, :, 0]), np.abs(p[:, None, 1] - p[None, :, 1]))
        near = (d <= radius) & ~np.eye(len(p), dtype=bool)
        alive = rng.random(len(p)) < 0.5
        assert (world.local_stock(alive) == (near & alive[None, :]).sum(axis=1)).all()


# ----- a sweep's cells ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("scenario, grid, says", [
    ("gathering", "{map: [small, nosuchmap]}", "unknown map 'nosuchmap'"),
    ("cleanup", "{map: [small, default], agents: [5, 500]}", "start cells"),
    ("gathering", "{map: [small, BIG]}", "cells"),
])
def test_a_sweeps_bad_cells_are_refused_before_anything_runs(scenario, grid, says, tmp_path, db_url):
    """Every cell is checked up front, the map of each too: the sweep exits 2 and stores nothing (an unknown map was
    found only when its cell ran: exit 1 and an error run)."""
    big = _square(tmp_path / "big.txt", int(math.isqrt(MAX_CELLS)) + 1)
    path = tmp_path / "s.sweep.yaml"
    path.write_text(f"scenario: {scenario}\nbase: {{episode_steps: 2}}\ngrid: {grid.replace('BIG', big)}\nseeds: 2\n")
    with pytest.raises(UsageError, match=says):
        load_sweep(path)
    proc = cli("sweep", str(path), db=db_url)
    assert proc.returncode == 2 and says in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "runs.db").exists() or Store(db_url).count_runs() == 0
