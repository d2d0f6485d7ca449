"""Observations never write the world: what the environment hands a policy is a copy, what scripted strategies and
the sandbox read is a read-only view, so writing to either changes nothing of the episode nor of its replay."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import scripted_model
from scenarios.grid import api
from scenarios.registry import REGISTRY
from sim.core.observations import View, plain_copy, read_only
from sim.env import parallel_env
from runner.replay import replay_run
from sim.store.store import Store

#: a small episode of each scenario (its focal agents and a scripted background where it has one)
SMALL = {
    "commons": {"months": 4, "fishers": 4, "population": [{"count": 1, "policy": "llm"},
                                            {"count": 3, "policy": "scripted", "strategy": "sustainable"}]},
    "donor": {"agents": 6, "generations": 2, "rounds": 2},
    "market": {"customers_n": 3, "businesses_n": 3},
    "social": {"agents": 8, "ticks": 4},
    "gathering": {"agents": 4, "map": "small", "episode_steps": 6,
                  "population": [{"count": 2, "policy": "llm"}, {"count": 2, "policy": "scripted"}]},
    "cleanup": {"agents": 3, "map": "small", "episode_steps": 6},
}


def vandalise(value, depth: int = 0, seen=None) -> None:
    """Write to everything reachable from `value`: arrays inverted or shifted, lists reversed and extended, mapping
    values replaced and keys added, objects' attributes vandalised in turn (what a careless or hostile policy does)."""
    seen = set() if seen is None else seen
    if depth > 6 or id(value) in seen or isinstance(value, (str, bytes, int, float, bool, type(None))):
        return
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        if value.flags.writeable and value.size and value.dtype != object:
            if value.dtype == bool:
                value[...] = ~value
            else:
                value += 1
        return
    if isinstance(value, dict):
        for k in list(value):
            vandalise(value[k], depth + 1, seen)
            if isinstance(value[k], (int, float)) and not isinstance(value[k], bool):
                value[k] = value[k] * 3 + 7
        value["_vandal"] = 1
        return
    if isinstance(value, list):
        for v in value:
            vandalise(v, depth + 1, seen)
        value.reverse()
        value.append(None)
        return
    if isinstance(value, (tuple, set, frozenset)):
        for v in value:
            vandalise(v, depth + 1, seen)
        return
    for name, attr in list(getattr(value, "__dict__", {}).items()):
        vandalise(attr, depth + 1, seen)


def modest(action):
    """A sampled action, a number cut to a tenth (a fishery that lasts more than a month)."""
    return action / 10 if isinstance(action, float) else action


def play(scenario: str, db_url: str, vandal: bool) -> str:
    """One seeded episode of actions drawn from seeded action spaces; `vandal` writes to every observation, message
    and info first. Returns the episode's run id."""
    env = parallel_env(scenario, db=db_url, seed=1, **SMALL[scenario])
    obs, infos = env.reset(seed=11)
    for i, a in enumerate(env.possible_agents):
        env.action_space(a).seed(100 + i)
    while env.agents:
        actions = {a: modest(env.action_space(a).sample()) for a in env.agents}
        if vandal:
            vandalise(obs)
            vandalise(infos)
        obs, _, _, _, infos = env.step(actions)
    run_id = env.run_id
    env.close()
    return run_id


@pytest.mark.parametrize("scenario", sorted(REGISTRY))
def test_writing_to_the_envs_observations_changes_nothing_of_the_episode_or_its_replay(scenario, db_url):
    """A policy that writes to everything it is handed plays the same episode as one that does not, and it replays."""
    clean, vandalised = play(scenario, db_url, False), play(scenario, db_url, True)
    store = Store(db_url)
    a, b = store.tick_snapshots(clean), store.tick_snapshots(vandalised)
    assert a and a == b
    report = replay_run(store, vandalised)
    assert report["matched"], report["mismatches"][:3]


@pytest.mark.parametrize("scenario", ["gathering", "cleanup"])
def test_the_grid_view_strategies_read_cannot_write_the_world(scenario):
    """A scripted strategy's view of the grid refuses writes to the world's arrays, attributes and agent index."""
    model = scripted_model(scenario, sets=["map=small", "agents=3"], policy="scripted")
    model.step()
    view = model.view()
    world = model.world
    before = (world.apples.copy(), world.pos.copy(), world.timeout.copy(), dict(model.index))
    with pytest.raises(ValueError):
        view.world.apples[:] = ~view.world.walls  # the reward hack
    for name in ("pos", "timeout", "waste", "walls", "orient", "hits"):
        with pytest.raises(ValueError):
            getattr(view.world, name).flags.writeable = True  # nor made writeable again
    with pytest.raises(AttributeError):
        view.world.apples = np.ones_like(world.apples)
    with pytest.raises(TypeError):
        view.index[model.foragers[0].unique_id] = 99
    assert (world.apples == before[0]).all() and (world.pos == before[1]).all() and dict(model.index) == before[3]
    data = view.as_data()  # what leaves the process: a copy
    data["apples"][:] = True
    data["agent_pos"][:] = 0
    assert (world.apples == before[0]).all() and (world.pos == before[1]).all()


def test_the_synthesis_observation_is_read_only_on_both_sides_of_the_sandbox():
    """The program's observation (built by the grid) and its decoded arrays (in the worker) cannot be written."""
    model = scripted_model("gathering", sets=["map=small", "agents=2"], policy="scripted")
    model.step()
    model.program = {"id": "1.0", "code": "def policy(obs):\n    return STAND\n", "iteration": 1, "api": "x"}
    obs = model.program_observation()
    with pytest.raises(TypeError):
        obs["index"][model.foragers[0].unique_id] = 5
    with pytest.raises(TypeError):
        obs["program"]["code"] = "import os"
    assert model.program["code"].startswith("def policy")
    seen = api.observation(obs["static"], obs["state"], 0)
    for name in ("agent_pos", "agent_timeout", "apple_alive", "walls", "waste"):
        arr = getattr(seen, name)
        with pytest.raises((ValueError, api.TamperError)):
            arr.flags.writeable = True
            arr[...] = 0
    with pytest.raises(TypeError):
        object.__getattribute__(seen, "_fields")["agent_pos"] = np.zeros((2, 2))


def test_plain_copy_shares_nothing_and_read_only_follows_its_array():
    """`plain_copy` rebuilds containers and arrays (a View as its data); `read_only` views follow the array."""

    class Window(View):
        def __init__(self, arr):
            self.arr = arr

        def as_data(self):
            return {"arr": self.arr}

    arr = np.arange(4)
    original = {"a": [1, {"b": arr}], "t": (arr,), "w": Window(arr), "s": {1, 2}, "n": np.int64(3)}
    copied = plain_copy(original)
    copied["a"][1]["b"][:] = 0
    copied["t"][0][:] = 0
    copied["w"]["arr"][:] = 0
    assert (arr == np.arange(4)).all() and copied["n"] == 3 and type(copied["n"]) is int
    view = read_only(arr)
    arr[0] = 9
    assert view[0] == 9
    with pytest.raises(ValueError):
        view[0] = 1
