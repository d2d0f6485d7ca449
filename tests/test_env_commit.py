"""The env's group commit: an episode's ticks committed `commit_every` at a time store exactly what tick-by-tick
commits store, and a crash mid-episode loses only the pending ticks (the run resumes from its last committed one)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from agents.llm.base import Answer
from analysis.trajectories import trajectory_rows
from conftest import ROOT, cli, cli_json
from runner.resume import resume_run
from sim.env import parallel_env
from sim.store.store import Store

WORLD = {"fishers": 4, "months": 7, "talk": True,
         "population": [{"count": 2, "policy": "llm"}, {"count": 2, "policy": "scripted", "strategy": "greedy"}]}


def catch(tick: int, agent: str) -> float:
    """A focal agent's catch: a different number each month and agent, so that a tick stored out of place shows."""
    return float((tick * 3 + int(agent.rsplit("_", 1)[1])) % 7)


def act(obs: dict) -> dict:
    """Every pending request answered: a catch for a number, the first option for a choice, a line for a text."""
    actions = {}
    for agent, o in obs.items():
        if o["request"] is None:
            continue
        spec = o["request"]["spec"]
        actions[agent] = (catch(o["tick"], agent) if spec["type"] == "number" else
                          spec["options"][0] if spec["type"] == "choice" else f"month {o['tick']}, {agent}")
    return actions


def play(db: str, every: int, seed: int = 3) -> str:
    """One whole episode committed `every` ticks at a time; its run id."""
    env = parallel_env("commons", db=db, seed=seed, commit_every=every, **WORLD)
    obs, _ = env.reset(seed=seed)
    while env.agents:
        obs, *_ = env.step(act(obs))
    run_id = env.run_id
    env.close()
    return run_id


def stored(store: Store, run_id: str) -> dict:
    """Every stored row of a run that does not name the episode (its run id, its model id, timings)."""
    run = store.get_run(run_id)
    return {
        "ticks": [(t.tick, t.metrics, t.state) for t in store.ticks(run_id)],
        "steps": [(s.tick, s.agent_id, s.backend, s.action, s.payoff, s.reward, s.fallback, s.reason, s.memory,
                   s.components) for s in store.steps(run_id)],
        "events": [(e.tick, e.kind, e.actor, e.target, e.data) for e in store.events(run_id)],
        "calls": [(c.tick, c.agent_id, c.phase, c.backend, c.prompt, c.answer, c.value, c.fallback, c.cache_hit)
                  for c in store.llm_calls(run_id)],
        "run": (run.status, run.ticks, run.final_metrics, run.cached),
        "trajectories": [{k: v for k, v in row.items() if k not in ("run_id", "model_id", "weights_sha256")}
                         for row in trajectory_rows(store, run_id)],
    }


def test_episodes_committed_in_groups_store_what_tick_by_tick_commits_store(db_url):
    """Groups of 1, 3 (the last one short) and 10 (one group, longer than the episode) store the same rows, the same
    trajectories, and each replays tick for tick."""
    store = Store(db_url)
    runs = {every: play(db_url, every) for every in (1, 3, 10)}
    reference = stored(store, runs[1])
    assert reference["run"][:2] == ("finished", 7) and len(reference["calls"]) > 7
    for every in (3, 10):
        assert stored(store, runs[every]) == reference, f"commit_every={every}"
    proc = cli("replay", runs[10], db=db_url)
    assert proc.returncode == 0, proc.stderr


def test_a_running_episode_has_committed_its_whole_groups_only(db_url, tmp_path):
    """Mid-episode another connection sees the ticks of the groups committed, none pending; close() commits the
    rest (the run stored as failed at the tick it reached)."""
    env = parallel_env("commons", db=db_url, seed=1, commit_every=4, fishers=2, months=12)
    env.reset(seed=1)
    seen = []
    while env.tick < 9:
        env.step({a: 1.0 for a in env.agents})
        seen.append((env.tick, Store(db_url).get_run(env.run_id).ticks))
    assert seen == [(t, t - t % 4) for t in range(1, 10)]
    env.close()
    run = Store(db_url).get_run(env.run_id)
    assert (run.status, run.ticks) == ("failed", 9)
    assert [t.tick for t in Store(db_url).ticks(env.run_id)] == list(range(1, 10))


CHILD = """
import sys, time
from sim.env import parallel_env
env = parallel_env("commons", db=sys.argv[1], seed=5, commit_every=4, fishers=3, months=12)
env.reset(seed=5)
while env.tick < 6:
    env.step({a: 1.0 for a in env.agents})
print(env.run_id, flush=True)
time.sleep(300)
"""


class Constant:
    """The child's policy, as an LLM: every request answered 1.0, as the env answers an action of 1.0."""

    model_id, sampling = "constant", {}

    def answer(self, requests, messages):
        return [Answer(r.space.validate(1.0), raw="1.0") for r in requests]


@pytest.mark.slow
def test_an_episode_killed_mid_group_keeps_its_committed_groups_and_resumes_from_there(tmp_path):
    """kill -9 at tick 6 of groups of 4: the run is stale at tick 4 (ticks 5 and 6 lost), its ticks whole; resumed
    with the same policy it ends as the uninterrupted episode does."""
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    child = subprocess.Popen([sys.executable, "-c", CHILD, url], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    run_id = child.stdout.readline().strip()
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL and run_id, child.stderr.read()
    [listed] = cli_json("list", db=url)
    assert (listed["run_id"], listed["live"], listed["ticks"]) == (run_id, "stale", 4)
    store = Store(url)
    assert [t.tick for t in store.ticks(run_id)] == [1, 2, 3, 4]
    assert {s.tick for s in store.steps(run_id)} == {1, 2, 3, 4}

    proc = cli("resume", run_id, db=url)  # no policy to go on with here: refused in one line, the run left as it is
    assert proc.returncode == 2 and "env episode" in proc.stderr and "Traceback" not in proc.stderr
    assert cli_json("list", db=url) == [listed]

    resumed = resume_run(store, run_id, llm_factory=Constant)
    assert (resumed.run_id, resumed.status, resumed.ticks) == (run_id, "finished", 12)
    reference = parallel_env("commons", db=url, seed=5, commit_every=1, fishers=3, months=12)
    reference.reset(seed=5)
    while reference.agents:
        reference.step({a: 1.0 for a in reference.agents})
    reference.close()
    got, want = stored(store, run_id), stored(store, reference.run_id)
    for part in ("ticks", "steps", "events"):
        assert got[part] == want[part], part
    assert got["run"][:3] == want["run"][:3]
