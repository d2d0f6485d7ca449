"""Scripted decisions as trajectories: one row per decision, with the prompt an LLM agent in the seat would be sent."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agents.llm.backend import LLMBackend
from agents.llm.base import Answer
from agents.scripted import ScriptedBackend
from analysis.trajectories import COLUMNS, trajectory_rows
from conftest import ROOT, cli, cli_json
from runner.config import build_spec
from runner.execution import execute
from scenarios.commons.model import CommonsModel
from sim.store.store import Store
from sim.store.tables import AgentStep, LLMCall

MIXED = "population=[{count: 3, strategy: sustainable}, {count: 2, strategy: greedy}]"


def _decisions(store: Store, run_id: str) -> set[tuple[int, int, str]]:
    return {(r.tick, r.agent_id, p) for rows in store.iter_rows(AgentStep, run_id) for r in rows for p in (r.action or {})}


def test_a_scripted_run_exports_one_row_per_decision_that_loads_with_datasets(db_url, tmp_path):
    """Every scripted decision is a row (prompt, action, reward vector, return to go; token fields null), and the
    files load with `datasets` from JSON lines and from pandas."""
    import datasets
    import pandas as pd

    run = cli_json("run", "commons", "--set", "months=5", "--set", "talk=true", "--set", MIXED, "--seed", "2", db=db_url)
    out = tmp_path / "traj"
    proc = cli("export", run["run_id"], "--format", "trajectories", "--out", str(out), db=db_url)
    assert proc.returncode == 0, proc.stderr
    store = Store(db_url)
    lines = [json.loads(x) for x in (out / "trajectories.jsonl").read_text().splitlines()]
    assert {(r["tick"], r["agent_id"], r["phase"]) for r in lines} == _decisions(store, run["run_id"])
    assert len(lines) == len(_decisions(store, run["run_id"])) == 5 * 5 * 2
    for r in lines:
        assert r["policy"] == "scripted" and r["strategy"] in ("sustainable", "greedy")
        assert r["completion_ids"] is r["logprobs"] is r["prompt_ids"] is r["model_id"] is None
        assert [m["role"] for m in r["prompt"]] == ["system", "user"] and f"fisher {r['agent_id']}" in r["prompt"][1]["content"]
        assert r["reward_vector"] is not None and r["return_to_go"] is not None
    # return to go: this tick's reward plus the later ones', per agent
    harvest = sorted((r for r in lines if r["phase"] == "harvest"), key=lambda r: (r["agent_id"], r["tick"]))
    for a, b in zip(harvest, harvest[1:]):
        if a["agent_id"] == b["agent_id"]:
            assert a["return_to_go"] == pytest.approx(a["reward"] + b["return_to_go"])
    by_jsonl = datasets.Dataset.from_json(str(out / "trajectories.jsonl"))
    by_pandas = datasets.Dataset.from_pandas(pd.read_parquet(out / "trajectories.parquet"))
    assert len(by_jsonl) == len(by_pandas) == len(lines) and set(COLUMNS) <= set(by_pandas.column_names)
    assert by_pandas["action"] == [r["action"] for r in lines]


def test_a_scripted_prompt_is_the_one_an_llm_agent_in_that_seat_is_sent(db_url):
    """The rendered prompt of a scripted seat equals the prompt the run gives an LLM agent there (memory and feedback
    included): a run whose seat 1 is an LLM answering as the sustainable strategy stores the same prompts."""
    store = Store(db_url)
    scripted = execute(build_spec("commons", sets=["months=4", "strategy=sustainable"], seed=5), store).run_id
    rows = {(r["tick"], r["agent_id"]): r for r in trajectory_rows(store, scripted)}

    class Sustainable:  # an LLM that answers what the sustainable fisher did
        model_id, sampling = "test", {}

        def answer(self, requests, messages):
            return [Answer(json.loads(rows[(r.tick, r.agent_id)]["action"])) for r in requests]

    spec = build_spec("commons", sets=["months=4", "strategy=sustainable", "policy=llm"], seed=5)
    backends = {"scripted": ScriptedBackend(CommonsModel.strategies), "llm": LLMBackend("test", {}, llm=Sustainable())}
    llm_run = execute(spec, store, backends=backends).run_id
    calls = [c for chunk in store.iter_rows(LLMCall, llm_run) for c in chunk]
    assert len(calls) == len(rows) == 4 * 5
    for c in calls:
        mine = rows[(c.tick, c.agent_id)]["prompt"]
        assert "\n".join(f"[{m['role']}] {m['content']}" for m in mine) == c.prompt
    assert any("Last round: reward" in r["prompt"][-1]["content"] for r in rows.values())  # feedback is rendered


def test_a_scenario_whose_world_changes_under_llm_seats_is_refused_in_one_line(db_url, tmp_path):
    """Social network seats read their stance back when an LLM's: the export says so (exit 2), and `--decisions llm`
    exports the LLM agents' rows only (none here)."""
    run = cli_json("run", "social", "--ticks", "3", db=db_url)
    proc = cli("export", run["run_id"], "--format", "trajectories", "--out", str(tmp_path / "t"), db=db_url)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "scripted agents sit as LLM agents" in proc.stderr and "--decisions llm" in proc.stderr
    assert not (tmp_path / "t" / "trajectories.jsonl").exists()
    proc = cli("export", run["run_id"], "--format", "trajectories", "--decisions", "llm", "--out", str(tmp_path / "t"), db=db_url)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "t" / "trajectories.jsonl").read_text() == ""
    proc = cli("export", run["run_id"], "--format", "trajectories", "--decisions", "some", "--out", str(tmp_path / "u"), db=db_url)
    assert proc.returncode == 2 and "'--decisions'" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_sft_example_small_fine_tunes_on_the_sustainable_rows_and_probes_the_result(tmp_path):
    """examples/sft_commons.py --small trains on the sustainable fisher's rows and reports the stock probe's verdict."""
    out = tmp_path / "sft"
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "sft_commons.py"), "--small", "--out", str(out)],
                          capture_output=True, text=True, timeout=1500, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rows"] > 0 and summary["loss"]["last"] < summary["loss"]["first"]
    assert isinstance(summary["follows_stock"], bool) and "follows the stock" in proc.stdout
    assert Path(summary["model"]).is_dir()
