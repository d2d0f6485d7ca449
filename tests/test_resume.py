"""Crash safety and forks: a killed or failed run resumes to exactly the uninterrupted result; forks branch cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, cli, cli_json
from runner.config import build_spec
from sim.core.errors import UsageError
from runner.resume import fork_run, resume_run
from runner.execution import RunFailed, execute
from sim.store.store import Store

MIXED = ["months=7", "fishers=4", "social_learning=true",
         "population=[{count: 2, policy: llm}, {count: 2, policy: scripted, strategy: random}]"]


def llm_spec(seed=3, delay=0.0, down_file="", sets=MIXED):
    args = {"delay": delay, **({"down_file": down_file} if down_file else {})}
    return build_spec("commons", sets=sets, seed=seed, llm={"provider": "langchain", "cls": "tests.fakechat:HashChat",
                                                              "args": args, "max_retries": 0})


def stored(store: Store, run_id: str) -> dict:
    """Every stored tick, agent step and event of a run, without ids and timings."""
    ticks = {t.tick: (t.metrics, t.state) for t in store.ticks(run_id)}
    steps = [(s.tick, s.agent_id, s.backend, s.action, s.payoff, s.reward, s.fallback, s.memory) for s in store.steps(run_id)]
    events = [(e.tick, e.kind, e.actor, e.target, e.data) for e in store.events(run_id)]
    run = store.get_run(run_id)
    return {"ticks": ticks, "steps": steps, "events": events, "final": run.final_metrics, "status": run.status,
            "n": run.ticks}


def _ticks(url: str) -> int:
    try:
        return max((r.ticks for r in Store(url, create=False).list_runs()), default=0)
    except Exception:  # noqa: BLE001 - the child may not have created the store yet
        return 0


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_equals_an_uninterrupted_run(tmp_path):
    """A real `societas run` killed with SIGKILL mid-tick keeps its committed ticks and resumes to the same result."""
    url = f"sqlite:///{tmp_path / 'killed.db'}"
    spec = llm_spec(delay=0.4)  # each tick waits in the LLM call: the kill lands mid-tick
    cmd = [sys.executable, "-m", "societas.cli", "run", "commons", *sum((["--set", s] for s in MIXED), []), "--seed", "3",
           "--llm", "tests.fakechat:HashChat", "--llm-arg", "delay=0.4", "--db", url, "--json"]
    cfg = tmp_path / "llm.yaml"
    cfg.write_text("llm: {max_retries: 0}\n")
    child = subprocess.Popen([*cmd, "--config", str(cfg)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while _ticks(url) < 2 and time.time() < deadline and child.poll() is None:
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    store = Store(url)
    [run] = store.list_runs()
    assert child.returncode == -signal.SIGKILL
    assert run.status == "running" and 2 <= run.ticks < 7, "killed before the end, committed ticks kept"
    assert [t.tick for t in store.ticks(run.id)] == list(range(1, run.ticks + 1))
    assert run.spec == spec.model_dump(mode="json")

    resumed = cli_json("resume", run.id, db=url)
    assert resumed["run_id"] == run.id and resumed["ticks"] == 7
    assert [r.id for r in store.list_runs()] == [run.id], "same run row, no new run"
    after = store.get_run(run.id)
    assert after.origin == "run" and after.status == resumed["status"] and after.owner_pid != run.owner_pid

    reference = Store(f"sqlite:///{tmp_path / 'reference.db'}")
    ref_id = execute(spec, reference).run_id
    assert stored(store, run.id) == stored(reference, ref_id)


def _run_until_server_down(store, spec, down: Path, after_tick: int):
    def progress(tick, total, record):
        if tick == after_tick:
            down.touch()  # the server goes down while tick `after_tick + 1` is being decided

    with pytest.raises(RunFailed) as info:
        execute(spec, store, progress=progress)
    return store.get_run(info.value.run_id)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_run_failed_by_a_down_llm_server_resumes_to_the_uninterrupted_result(backend, tmp_path, db_url, pg_url_factory):
    """The LLM server going down fails the run with the reason; once it is back, resume finishes it identically."""
    url = db_url if backend == "sqlite" else pg_url_factory()
    store = Store(url)
    down = tmp_path / "down"
    spec = llm_spec(down_file=str(down))
    run = _run_until_server_down(store, spec, down, after_tick=3)
    assert run.status == "failed" and "unreachable" in run.reason and run.ticks == 3
    with pytest.raises(RunFailed, match="unreachable"):  # still down: fails again, nothing lost
        resume_run(store, run.id)
    assert store.get_run(run.id).ticks == 3
    down.unlink()
    result = resume_run(store, run.id)
    assert result.run_id == run.id and result.ticks == 7 and result.status in ("finished", "collapsed")
    reference = Store(f"sqlite:///{tmp_path / 'ref.db'}")
    assert stored(store, run.id) == stored(reference, execute(spec, reference).run_id)
    llm_ticks = sorted({c.tick for c in store.llm_calls(run.id)})
    assert llm_ticks == list(range(1, 8)), "replayed ticks' LLM calls are not stored twice"
    assert len(store.llm_calls(run.id)) == 2 * 7


def test_resume_refuses_finished_and_live_runs(store):
    """A finished run has nothing to resume; a running run whose process lives is not taken over."""
    done = execute(build_spec("commons", ticks=2), store)
    with pytest.raises(UsageError, match="finished: nothing to resume"):
        resume_run(store, done.run_id)
    live = store.create_run(build_spec("commons", ticks=2), {})  # owned by this (live) test process...
    with store.engine.begin() as conn:  # ...as seen from another process: owner is our parent, alive
        conn.exec_driver_sql("UPDATE runs SET owner_pid = ? WHERE id = ?", (os.getppid(), live))
    with pytest.raises(UsageError, match="still running"):
        resume_run(store, live)


def test_a_replay_that_differs_from_the_store_fails_naming_the_tick(store):
    """Resume checks every replayed tick against the stored one and stops at the first difference."""
    spec = build_spec("commons", ticks=5, seed=2, sets=["strategy=random"])
    run_id = execute(spec, store).run_id
    with store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE runs SET status = 'failed' WHERE id = ?", (run_id,))
        conn.exec_driver_sql("UPDATE agent_steps SET payoff = payoff + 1 WHERE run_id = ? AND tick = 3 AND agent_id = 2",
                             (run_id,))
    with pytest.raises(RunFailed, match="replay of tick 3 does not match.*agent 2"):
        resume_run(store, run_id)


def test_fork_copies_the_parent_up_to_the_branch_then_diverges(store):
    """A fork equals its parent up to tick AT (copied rows), records its lineage, then runs the new config."""
    parent = execute(build_spec("commons", seed=4, sets=["strategy=random", "months=8"]), store)
    fork = fork_run(store, parent.run_id, 4, ["sanctions=true", "months=10"])
    run = store.get_run(fork.run_id)
    assert (run.origin, run.parent_id, run.branch_tick, run.ticks) == ("fork", parent.run_id, 4, 10)
    assert run.spec["config"]["sanctions"] is True and store.get_run(parent.run_id).spec["config"]["sanctions"] is False
    p, f = stored(store, parent.run_id), stored(store, fork.run_id)
    assert {t: p["ticks"][t] for t in range(1, 5)} == {t: f["ticks"][t] for t in range(1, 5)}
    assert [s for s in p["steps"] if s[0] <= 4] == [s for s in f["steps"] if s[0] <= 4]
    assert [e for e in p["events"] if e[0] <= 4] == [e for e in f["events"] if e[0] <= 4]
    kinds_after = {e[1] for e in f["events"] if e[0] > 4}
    assert "norm.sanction" in kinds_after and not any(e[1] == "norm.statement" for e in p["events"])
    # the same fork of the same parent is reproducible: its own resume-free rerun is identical
    again = fork_run(store, parent.run_id, 4, ["sanctions=true", "months=10"])
    assert stored(store, again.run_id) == f


def test_fork_refuses_fields_that_cannot_change_mid_run(store):
    """Changing the number of agents (or the tick range) in a fork is refused with a clear message."""
    parent = execute(build_spec("commons", ticks=4), store)
    with pytest.raises(UsageError, match="'fishers' cannot change mid-run.*may change in a fork of commons: .*sanctions"):
        fork_run(store, parent.run_id, 2, ["fishers=7"])
    with pytest.raises(UsageError, match="'--at': 9; run .* has committed ticks 1..4"):
        fork_run(store, parent.run_id, 9, ["sanctions=true"])
    with pytest.raises(UsageError, match="keeps its parent's seed"):
        fork_run(store, parent.run_id, 2, ["seed=3"])
    assert len(store.list_runs()) == 1, "nothing written"


@pytest.mark.slow
def test_cli_fork_and_show_compare_parent(tmp_path):
    """`societas fork` then `show --compare-parent` puts both runs' ticks side by side, branch marked."""
    from analysis.sweeps import compare_runs

    url = f"sqlite:///{tmp_path / 'f.db'}"
    parent = execute(build_spec("commons", sets=["strategy=random", "months=6"], seed=4), Store(url))
    fork = cli_json("fork", parent.run_id, "--at", "2", "--set", "sanctions=true", db=url)
    report = compare_runs(Store(url), fork["run_id"])
    assert report["parent_id"] == parent.run_id and report["branch_tick"] == 2
    assert report["changed"] == {"sanctions": "False -> True"}
    assert report["ticks"][1]["parent"] == report["ticks"][1]["fork"]
    text = cli("show", fork["run_id"], "--compare-parent", db=url)
    assert text.returncode == 0 and "2 *" in text.stdout and "sanctions=False -> True" in text.stdout
    bad = cli("fork", parent.run_id, "--at", "2", "--set", "fishers=9", db=url)
    assert bad.returncode == 2 and "cannot change mid-run" in bad.stderr


# ----- a run resolves itself once: the bound spec ------------------------------------------------------------
BUILT_IN_CONFIGS = sorted(p for p in (ROOT / "scenarios").glob("*/configs/*.yaml") if not p.name.endswith(".sweep.yaml"))


@pytest.mark.parametrize("path", BUILT_IN_CONFIGS, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_the_config_a_run_is_built_with_is_the_one_its_stored_spec_gives_back(path):
    """`build_spec` validates a config once and the run is built from that; a replay, resume or fork builds it from
    the stored spec's data: the two must be the same config, or a stored run would not replay."""
    from sim.core.spec import RunSpec
    from runner.config import BoundSpec, bind

    try:
        spec = build_spec(path.parent.parent.name, config_file=str(path))
    except UsageError as exc:  # a Magentic market's config without the data beside the checkout
        pytest.skip(str(exc))
    assert isinstance(spec, BoundSpec)
    again = bind(RunSpec.model_validate(spec.model_dump(mode="json")))
    assert again.settings == spec.settings and again.population == spec.population


def test_execute_trusts_a_bound_spec_and_binds_any_other_once(store, monkeypatch):
    """A spec from `build_spec` runs without being looked up or validated again; a changed copy is a plain RunSpec,
    bound (and so checked) when it runs: a bad strategy in it is bad input and stores nothing."""
    from sim.core.spec import RunSpec
    from runner import config as runner_config
    from runner.config import BoundSpec

    spec = build_spec("commons", sets=["fishers=3", "months=2"], seed=1)
    calls = []
    real = runner_config.validate_config
    monkeypatch.setattr(runner_config, "validate_config", lambda *a: calls.append(a) or real(*a))
    first = execute(spec, store)
    assert first.status == "finished" and calls == []
    copy = spec.model_copy(update={"seed": 2})
    assert type(copy) is RunSpec and not isinstance(copy, BoundSpec) and copy != spec and copy.seed == 2
    assert spec.model_copy() is spec and spec == RunSpec.model_validate(spec.model_dump())
    assert execute(copy, store).status == "finished" and len(calls) == 1
    bad = spec.model_copy(update={"config": {**spec.config, "population": [{"count": 3, "strategy": "nobody"}]}})
    runs = len(store.list_runs())
    with pytest.raises(UsageError, match="bad value for 'population.strategy': 'nobody'"):
        execute(bad, store)
    assert len(store.list_runs()) == runs
