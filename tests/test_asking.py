"""Interviews and surveys: LLM agents of a stored run answer from their state at a tick, through their own model; the
answers are stored as runs of origin interview/survey and replay from the cache; scripted agents are refused."""

from __future__ import annotations

import pytest

import societas.api as api
from conftest import cli, cli_json
from runner.config import build_spec
from runner.execution import execute
from runner.replay import replay_run
from runner.studies import interview, survey, survey_sweep
from runner.sweeps.backlog import prepare
from runner.sweeps.executor import run_sweep
from runner.sweeps.spec import parse_sweep, sweep_id
from sim.core.errors import UsageError
from sim.store.store import Store

HASH = {"provider": "langchain", "cls": "tests.fakechat:HashChat", "args": {}, "max_retries": 0}
#: two agents on two sampling settings of the embedded model
TWO = ["fishers=2", "months=1", "population=[{count: 1, name: cold, llm: {temperature: 0.0}}, "
                                "{count: 1, name: hot, llm: {temperature: 1.0}}]"]


@pytest.mark.slow
def test_interview_and_survey_of_a_two_model_run_on_the_embedded_model(tmp_path):
    """Each agent answers through its own model from its state at the tick; stored, asked again from the cache,
    replayable; the source run is left unchanged; a Likert survey is constrained to the scale; the API agrees."""
    url = f"sqlite:///{tmp_path / 'st.db'}"
    store = Store(url)
    run_id = execute(build_spec("commons", policy="llm", sets=TWO, seed=3), store).run_id
    before = (store.get_run(run_id).ticks, len(store.llm_calls(run_id)), len(store.steps(run_id)))

    first = interview(store, run_id, 1, "Why did you fish that much?", max_tokens=12)
    [row] = first.rows
    assert row["agent_id"] == 1 and row["group"] == "cold" and row["model"].endswith("t=0") and not row["cached"]
    assert isinstance(row["answer"], str) and row["answer"] and store.get_run(first.run_id).origin == "interview"
    again = interview(store, run_id, 1, "Why did you fish that much?", max_tokens=12)
    assert again.run_id != first.run_id and again.rows[0]["cached"] and again.rows[0]["answer"] == row["answer"]

    polled = survey(store, run_id, "The lake is in danger.", likert=True)
    assert [r["group"] for r in polled.rows] == ["cold", "hot"]
    assert {r["backend"] for r in polled.rows} == {"llm:1", "llm:2"}, "one batch per model"
    assert all(r["fallback"] or r["score"] in range(1, 6) for r in polled.rows)
    assert sum(polled.counts.values()) == sum(not r["fallback"] for r in polled.rows)
    assert replay_run(store, polled.run_id)["matched"] and replay_run(store, first.run_id)["matched"]
    hot = survey(store, run_id, "The lake is in danger.", likert=True, group="hot")
    assert [r["agent_id"] for r in hot.rows] == [2] and hot.rows[0]["cached"]
    assert (store.get_run(run_id).ticks, len(store.llm_calls(run_id)), len(store.steps(run_id))) == before

    frame = api.survey(run_id, "The lake is in danger.", likert=True, db=store)
    assert list(frame["answer"]) == [r["answer"] for r in polled.rows] and frame.attrs["tick"] == 1


@pytest.mark.slow
def test_survey_over_a_sweep_is_one_table_across_conditions(tmp_path):
    """A survey of a sweep's runs at their last tick: one row per agent with its run's condition, one cell per
    condition with the share of each choice."""
    store = Store(f"sqlite:///{tmp_path / 'sw.db'}")
    definition = parse_sweep({"scenario": "commons", "policy": "llm", "base": {"months": 1, "fishers": 2},
                              "grid": {"llm.temperature": [0.0, 1.0]}, "seeds": [1]})
    run_sweep(store, prepare(store, definition), workers=1)
    found = survey_sweep(store, sweep_id(definition), "Will you fish less next month?", choices=["yes", "no"])
    assert len(found.reports) == 2 and len(found.rows) == 4 and not found.skipped_runs
    assert sorted(c["llm.temperature"] for c in found.cells) == [0.0, 1.0]
    assert all(c["runs"] == 1 and c["asked"] == 2 for c in found.cells)
    assert {r["answer"] for r in found.rows if not r["fallback"]} <= {"yes", "no"}


@pytest.mark.parametrize("command", [["interview", "--agent", "1", "Why?"], ["survey", "Why?"]])
def test_a_scripted_run_cannot_be_interviewed(tmp_path, command):
    """On a scripted run, interview and survey exit 2 with one line saying a scripted agent cannot be interviewed;
    nothing is stored."""
    url = f"sqlite:///{tmp_path / 's.db'}"
    store = Store(url)
    run_id = execute(build_spec("commons", sets=["fishers=2", "months=1"]), store).run_id
    done = cli(command[0], run_id, *command[1:], db=url)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "scripted agent cannot be interviewed" in lines[0]
    assert store.count_runs() == 1


def test_scripted_agents_of_a_mixed_run_are_refused_or_skipped(tmp_path):
    """In a run mixing LLM and scripted groups, interviewing a scripted agent is refused, a survey skips it, and a
    group with no LLM agent is bad input; bad questions and agents too."""
    url = f"sqlite:///{tmp_path / 'm.db'}"
    store = Store(url)
    spec = build_spec("commons", policy="llm", llm=HASH, sets=[
        "fishers=2", "months=1", "population=[{count: 1, name: talk}, {count: 1, name: mute, policy: scripted}]"])
    run_id = execute(spec, store).run_id
    with pytest.raises(UsageError, match="scripted agent cannot be interviewed"):
        interview(store, run_id, 2, "Why?")
    with pytest.raises(UsageError, match="no agent 9"):
        interview(store, run_id, 9, "Why?")
    polled = survey(store, run_id, "Why?", max_tokens=4)
    assert [r["agent_id"] for r in polled.rows] == [1] and polled.skipped == 1
    with pytest.raises(UsageError, match="group 'mute' .* is scripted: a scripted agent cannot be asked"):
        survey(store, run_id, "Why?", group="mute")
    with pytest.raises(UsageError, match="bad value for '--group'"):
        survey(store, run_id, "Why?", group="nobody")
    runs = store.count_runs()
    for bad in (["survey", run_id, ""], ["survey", run_id, "Why?", "--choices", "a"],
                ["interview", run_id, "Why?", "--agent", "1", "--tick", "99"]):
        done = cli(*bad, db=url)
        assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert store.count_runs() == runs
    shown = cli_json("survey", run_id, "Why?", "--max-tokens", "4", db=url)
    assert shown["answers"][0]["cached"] and shown["source_id"] == run_id
