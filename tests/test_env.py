"""The PettingZoo environment at its edges: PettingZoo's own API and seed tests on every scenario at several sizes,
bad seeds, horizons and actions refused before anything is stored, and an env dropped without close()."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from pettingzoo.test import parallel_api_test, parallel_seed_test

from scenarios.registry import REGISTRY
from sim.core.errors import UsageError
from sim.env import parallel_env
from sim.store.store import Store

ROOT = Path(__file__).resolve().parents[1]

#: each scenario at several sizes: the smallest world, a small one, and one where its focal agents sit out
#: whole ticks (an episode with no focal decision at all: social's one tick nobody is shown a feed in)
SIZES = {
    "commons": [{"fishers": 1, "months": 1}, {"fishers": 3, "months": 3, "talk": True},
                {"fishers": 6, "months": 2, "population": [{"count": 2, "policy": "llm"},
                                                          {"count": 4, "policy": "scripted"}]}],
    "donor": [{"agents": 2, "generations": 1, "rounds": 1}, {"agents": 6, "generations": 2, "rounds": 2}],
    "market": [{"customers_n": 1, "businesses_n": 1}, {"customers_n": 4, "businesses_n": 3, "max_steps": 3}],
    "social": [{"agents": 3, "ticks": 1}, {"agents": 5, "ticks": 1, "post_rate": 0.0}, {"agents": 12, "ticks": 3}],
    "gathering": [{"agents": 1, "map": "small", "episode_steps": 2},
                  {"agents": 6, "map": "small", "episode_steps": 4, "iterations": 2}],
    "cleanup": [{"agents": 2, "map": "small", "episode_steps": 3}, {"agents": 5, "episode_steps": 4}],
}
CASES = [(name, size) for name in sorted(REGISTRY) for size in SIZES[name]]


def test_every_scenario_has_sizes_here():
    """A scenario added to the registry gets its sizes here (the PettingZoo tests run over all of them)."""
    assert set(SIZES) == set(REGISTRY)


@pytest.mark.parametrize("scenario, size", CASES, ids=[f"{n}-{i}" for n, s in SIZES.items() for i in range(len(s))])
def test_pettingzoo_api_and_seed_tests_pass(scenario, size, db_url):
    """PettingZoo's parallel API test (no warning allowed) and seed test pass on every scenario at every size."""
    env = parallel_env(scenario, db=db_url, seed=1, **size)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parallel_api_test(env, num_cycles=5000)
    env.close()
    parallel_seed_test(lambda: parallel_env(scenario, db=db_url, seed=1, **size))


def test_two_envs_given_one_seed_play_equal_episodes_to_the_end(db_url):
    """Observations, rewards and infos of two envs on one seed are equal data at every step (PettingZoo's seed test
    stops after one step)."""
    from gymnasium.utils.env_checker import data_equivalence

    envs = [parallel_env("gathering", db=db_url, seed=2, agents=3, map="small", episode_steps=5) for _ in range(2)]
    got = [env.reset(seed=42) for env in envs]
    assert data_equivalence(got[0], got[1])
    for env in envs:
        for i, a in enumerate(env.possible_agents):
            env.action_space(a).seed(i)
    while envs[0].agents:
        actions = [{a: env.action_space(a).sample() for a in env.agents} for env in envs]
        steps = [env.step(act) for env, act in zip(envs, actions)]
        assert data_equivalence(actions[0], actions[1]) and data_equivalence(steps[0], steps[1])
    assert envs[0].run_id != envs[1].run_id and not envs[1].agents


@pytest.mark.parametrize("seed", [-1, 2**63, 1.5, 2.0, True, "3", [1]])
def test_bad_seeds_are_refused_before_anything_is_stored(db_url, seed):
    """reset(seed=...) takes an integer from 0 to 2**63-1: anything else raises UsageError and stores nothing."""
    env = parallel_env("commons", db=db_url)
    with pytest.raises(UsageError, match="seed"):
        env.reset(seed=seed)
    assert Store(db_url).count_runs() == 0
    with pytest.raises(UsageError, match="seed"):
        parallel_env("commons", db=db_url, seed=seed)


@pytest.mark.parametrize("options", [{"ticks": 1.7}, {"ticks": 0}, {"ticks": True}, {"ticks": "2"}, {"ticks": 10**30},
                                     [("ticks", 2)]])
def test_bad_horizons_are_refused_not_truncated(db_url, options):
    """reset(options={"ticks": ...}) takes a whole number of ticks; 1.7 is refused, not cut to 1."""
    env = parallel_env("commons", db=db_url)
    with pytest.raises(UsageError):
        env.reset(seed=1, options=options)
    assert Store(db_url).count_runs() == 0


def test_a_horizon_the_config_refuses_is_refused_at_reset(db_url):
    """A horizon past what the scenario's config allows (the grid: steps <= episode_steps x iterations) is bad input."""
    env = parallel_env("gathering", db=db_url, map="small", agents=2, episode_steps=3)
    with pytest.raises(UsageError, match="steps"):
        env.reset(seed=1, options={"ticks": 4})
    obs, _ = env.reset(seed=1, options={"ticks": 2, "other": 1})  # unknown option keys are PettingZoo's to pass
    assert env.agents and Store(db_url).count_runs() == 1
    env.close()


def test_bad_actions_are_refused_or_recorded_never_raised_raw(db_url):
    """step(None) and unknown agents raise UsageError; values outside every float, or that cannot be printed, become
    the default with the reason recorded."""
    env = parallel_env("commons", db=db_url, fishers=3, months=2)
    with pytest.raises(UsageError, match="reset"):
        env.step({})
    env.reset(seed=3)
    for bad in (None, [1.0], "agent_1"):
        with pytest.raises(UsageError, match="mapping"):
            env.step(bad)
    with pytest.raises(UsageError, match="agent_99"):
        env.step({"agent_99": 1.0})
    _, rewards, *_ = env.step({"agent_1": 10**400, "agent_2": 10**5000, "agent_3": float("nan")})
    assert rewards == {"agent_1": 0.0, "agent_2": 0.0, "agent_3": 0.0}
    while env.agents:
        env.step({})
    assert env.step({}) == ({}, {}, {}, {}, {})  # after the end: nothing, until reset()
    # read once the episode has ended: its ticks are committed in groups (commit_every), tick 1 with the rest
    reasons = {s.agent_id: s.reason for s in Store(db_url).steps(env.run_id) if s.tick == 1}
    assert all("not a finite number" in reasons[a] for a in (1, 2, 3))
    env.close()


DROP = """
import sys
from sim.env import parallel_env
env = parallel_env("commons", db=sys.argv[1], seed=1)
env.reset(seed=1)
env.step({a: 1.0 for a in env.agents})
print(env.run_id)
{end}
"""


@pytest.mark.parametrize("end", ["", "del env\nprint('dropped')"])
def test_an_env_dropped_mid_episode_leaves_a_whole_store(tmp_path, end):
    """An env left open (the script ends, or the env is dropped) stores its episode as failed and folds the SQLite
    log into the file: runs.db alone, copied elsewhere, holds the run."""
    db = tmp_path / "runs.db"
    proc = subprocess.run([sys.executable, "-c", DROP.replace("{end}", end), f"sqlite:///{db}"], capture_output=True,
                          text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.split()[0]
    wal = tmp_path / "runs.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())  # the file alone
    run = Store(f"sqlite:///{copy}").get_run(run_id)
    assert run.status == "failed" and run.ticks >= 1


@pytest.mark.parametrize("kwargs, says", [({"db": 123}, "'db'"), ({"name": None}, "'name'"), ({"name": ""}, "'name'"),
                                          ({"seed": -3}, "'seed'"), ({"seed": 1.5}, "'seed'"), ({"months": True}, "months"),
                                          ({"render_mode": "human"}, "render_mode"), ({"commit_every": 0}, "'commit_every'"),
                                          ({"commit_every": 2.5}, "'commit_every'"), ({"commit_every": True}, "'commit_every'")])
def test_bad_constructor_arguments_are_refused_in_one_line(kwargs, says, db_url):
    """The env's own arguments are checked like reset's: UsageError naming the argument, nothing stored."""
    with pytest.raises(UsageError, match=says):
        parallel_env("commons", **{"db": db_url, **kwargs})
    assert not Path(db_url.removeprefix("sqlite:///")).exists() or Store(db_url).count_runs() == 0


def test_a_numpy_seed_is_a_seed(db_url):
    """An integer seed from numpy is taken as the integer it is, by the constructor and by reset."""
    import numpy as np

    env = parallel_env("commons", db=db_url, seed=np.int64(4), months=2)
    env.reset()
    first = env.run_id
    env.reset(seed=np.uint32(4))
    store = Store(db_url)
    assert store.get_run(first).seed == store.get_run(env.run_id).seed == 4
    env.close()
