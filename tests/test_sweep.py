"""Sweeps: parsing, ids, every combination once, resume after an interruption, cells with CIs, Ray."""

from __future__ import annotations

import subprocess
import statistics

import pytest

from sim.reward.intervals import mean_interval
from analysis.sweeps import cell_table, sweep_frame
from conftest import cli, cli_json
from sim.core.errors import UsageError
from sim.store.store import Store
from runner.sweeps.backlog import prepare
from runner.sweeps.status import status
from runner.sweeps.executor import run_sweep
from runner.sweeps.spec import load_sweep, parse_sweep, sweep_id

SWEEP = """\
scenario: commons
base: {months: 6}
grid:
  strategy: [sustainable, random]
  regrowth: [1.5, 2.0]
seeds: 3
"""


def write(tmp_path, text=SWEEP, name="sweep.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def stored_results(store: Store) -> dict:
    return {r.id: (r.status, r.ticks, r.final_metrics, [(t.tick, t.metrics) for t in store.ticks(r.id)])
            for r in store.list_runs()}


def test_sweep_file_errors_name_the_key(tmp_path):
    """Unknown keys, bad seeds, grid values that are not lists and bad config values are refused up front."""
    cases = [("scenario: commons\ngrd: {}\n", "unknown key 'grd'; valid keys"),
             ("scenario: nope\n", "bad value for 'scenario': 'nope'; valid: cleanup, commons"),
             ("scenario: commons\nseeds: [1, 1]\n", "bad value for 'seeds'"),
             ("scenario: commons\ngrid: {talk: true}\n", "non-empty list"),
             ("scenario: commons\ngrid: {fishers: [2, -1]}\n", "cell {'fishers': -1}: bad value for 'fishers'"),
             ("scenario: commons\ngrid: {fisher: [2]}\n", "unknown config field 'fisher'"),
             ("scenario: commons\nbase: {seed: 3}\n", "'seed' is a sweep key")]
    for text, message in cases:
        with pytest.raises(UsageError, match=message.replace("[", r"\[").replace("{", r"\{")):
            load_sweep(write(tmp_path, text))


def test_sweep_id_follows_the_content_not_the_layout(tmp_path):
    """Comments and formatting do not change the id; any change of content does."""
    a = sweep_id(load_sweep(write(tmp_path, SWEEP)))
    b = sweep_id(load_sweep(write(tmp_path, "# the same sweep\n" + SWEEP.replace("{months: 6}", "\n  months: 6"), "b.yaml")))
    c = sweep_id(load_sweep(write(tmp_path, SWEEP.replace("seeds: 3", "seeds: 4"), "c.yaml")))
    assert a == b and a != c


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_interrupted_sweep_resumes_to_the_uninterrupted_result(backend, tmp_path, db_url, pg_url_factory):
    """Runs never started, failed, or killed mid-run are redone (killed ones resumed), finished ones skipped;
    the result equals a sweep that ran straight through. Two worker processes write to the same store."""
    definition = parse_sweep({**__import__("yaml").safe_load(SWEEP)})
    url = db_url if backend == "sqlite" else pg_url_factory()
    store = Store(url)
    plan = prepare(store, definition)
    assert plan.total == 12 and len(plan.todo) == 12
    report = run_sweep(store, plan, workers=2)
    assert report["ran"] == 12 and report["statuses"] == {"finished": 12}
    clean = stored_results(store)

    ids = sorted(clean)
    dead = _dead_pid()
    with store.engine.begin() as conn:  # an interruption: one run never started, one failed, one killed after tick 2
        for table in ("agent_steps", "reward_vectors", "events", "llm_calls", "ticks"):
            conn.exec_driver_sql(f"DELETE FROM {table} WHERE run_id = '{ids[0]}'")
            conn.exec_driver_sql(f"DELETE FROM {table} WHERE run_id = '{ids[2]}' AND tick > 2")
        conn.exec_driver_sql(f"DELETE FROM run_agents WHERE run_id = '{ids[0]}'")  # (agents joined at 0: kept for ids[2])
        conn.exec_driver_sql(f"DELETE FROM runs WHERE id = '{ids[0]}'")
        conn.exec_driver_sql(f"UPDATE runs SET status = 'failed', reason = 'boom' WHERE id = '{ids[1]}'")
        conn.exec_driver_sql(f"UPDATE runs SET status = 'running', ticks = 2, owner_pid = {dead}, final_metrics = '{{}}' "
                             f"WHERE id = '{ids[2]}'")
    state = status(store, plan.sweep_id)
    assert state["statuses"] == {"finished": 9, "failed": 1, "stale": 1} and state["pending"] == 1
    again = prepare(store, definition)
    assert again.sweep_id == plan.sweep_id and again.done_before == 9
    assert sorted((r, m) for r, m, _ in again.todo) == sorted([(ids[0], "new"), (ids[1], "resume"), (ids[2], "resume")])
    report = run_sweep(store, again, workers=2)
    assert report["ran"] == 3 and report["skipped"] == 9 and report["failed"] == 0
    assert stored_results(store) == clean
    assert status(store, plan.sweep_id)["statuses"] == {"finished": 12}


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_sweep_frame_and_cells_with_confidence_intervals(store):
    """One row per run with overrides, seed and final metrics; per cell the mean and a 95% t interval."""
    definition = parse_sweep({"scenario": "commons", "base": {"months": 5}, "grid": {"strategy": ["random", "fixed"]},
                              "seeds": [3, 4, 5, 6]})
    run_sweep(store, prepare(store, definition), workers=1)
    frame, keys = sweep_frame(store, sweep_id(definition))
    assert keys == ["strategy"] and len(frame) == 8 and sorted(set(frame["seed"])) == [3, 4, 5, 6]
    assert {"run_id", "status", "gain", "efficiency"} <= set(frame.columns)
    cells = cell_table(frame, keys, ["gain"])
    assert list(cells["strategy"]) == ["fixed", "random"] and list(cells["n"]) == [4, 4]
    gains = list(frame[frame["strategy"] == "random"]["gain"])
    row = cells[cells["strategy"] == "random"].iloc[0]
    ci = mean_interval(gains)
    assert row["gain_mean"] == pytest.approx(statistics.mean(gains))
    assert (row["gain_lo"], row["gain_hi"]) == pytest.approx((ci["lo"], ci["hi"]))
    assert min(gains) <= row["gain_lo"] < row["gain_hi"] <= max(gains), "random catches differ between seeds"
    with pytest.raises(UsageError, match="unknown metric 'gian'"):
        cell_table(frame, keys, ["gian"])


@pytest.mark.slow
def test_cli_sweep_status_and_show(tmp_path):
    """`societas sweep` runs the grid, a second call skips it all; sweep-status and show --sweep report it."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    path = write(tmp_path, SWEEP.replace("seeds: 3", "seeds: 2"))
    first = cli_json("sweep", str(path), "--workers", "2", db=url)
    assert first["ran"] == 8 and first["statuses"] == {"finished": 8}
    second = cli_json("sweep", str(path), db=url)
    assert second["ran"] == 0 and second["skipped"] == 8 and second["sweep_id"] == first["sweep_id"]
    state = cli_json("sweep-status", first["sweep_id"][:6], db=url)
    assert state["total"] == 8 and state["statuses"] == {"finished": 8} and state["pending"] == 0
    shown = cli("show", "--sweep", first["sweep_id"], "--metric", "gain", db=url)
    assert shown.returncode == 0 and "gain" in shown.stdout and "random" in shown.stdout and "[" in shown.stdout
    bad = cli("sweep", str(path), "--executor", "dask", db=url)
    assert bad.returncode == 2 and "valid: local, ray" in bad.stderr


@pytest.mark.slow
def test_ray_sweep_equals_the_local_one(local_ray, tmp_path, pg_url_factory):
    """On a local Ray instance the same sweep gives the same stored runs as the process pool (PostgreSQL when available)."""
    import os

    definition = parse_sweep({"scenario": "commons", "base": {"months": 4}, "grid": {"sanctions": [False, True]},
                              "seeds": [1, 2], "policy": "scripted"})
    url = pg_url_factory() if os.environ.get("SOCIETAS_TEST_PG") else f"sqlite:///{tmp_path / 'ray.db'}"
    ray_store, local_store = Store(url), Store(f"sqlite:///{tmp_path / 'local.db'}")
    report = run_sweep(ray_store, prepare(ray_store, definition), executor="ray", workers=2)
    assert report["ran"] == 4 and report["statuses"] == {"finished": 4}
    run_sweep(local_store, prepare(local_store, definition), workers=1)
    assert stored_results(ray_store) == stored_results(local_store)


@pytest.mark.slow
def test_ray_llm_runs_share_one_model_actor(local_ray, tmp_path):
    """LLM runs of a Ray sweep send their batches to one model actor, which merges runs into common passes."""
    from runner.sweeps.ray_tasks import run_on_ray

    definition = parse_sweep({"scenario": "commons", "base": {"months": 2, "fishers": 2}, "seeds": [1, 2, 3],
                              "policy": "llm", "llm": {"temperature": 0.0}})
    store = Store(f"sqlite:///{tmp_path / 'llm.db'}")
    plan = prepare(store, definition)
    outcomes = []
    stats = run_on_ray(plan, address=None, workers=3, on_done=outcomes.append, batch_window_s=0.3)
    assert sorted(o.status for o in outcomes) == ["finished"] * 3, outcomes
    [actor] = stats["model_actors"]
    assert actor["calls"] == 3 * 2 and actor["requests"] == 3 * 2 * 2, "every run's batch went to the actor"
    assert actor["max_calls_per_pass"] >= 2 and actor["passes"] < actor["calls"], "runs shared forward passes"
    for run in store.list_runs():
        calls = store.llm_calls(run.id)
        assert len(calls) == 4 and not any(c.cache_hit for c in calls) and run.backends == "llm"
