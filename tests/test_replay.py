"""Replay only reads: it compares a re-run with the stored run tick by tick and writes nothing, unless asked to store
the replay (`--store`); a difference is still found wherever it is."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from conftest import cli, cli_json
from runner.replay import replay_run
from sim.store.store import Store

TABLES = ("runs", "ticks", "agent_steps", "events", "llm_calls", "run_agents")


def counts(path: Path) -> dict[str, int]:
    """Rows per table of a SQLite store."""
    with sqlite3.connect(path) as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}


def test_replay_writes_nothing_and_store_keeps_a_replay_on_request(tmp_path, db_url):
    """`replay` leaves every table and the file as they were; `replay --store` adds one run of origin replay."""
    db = tmp_path / "runs.db"
    run = cli_json("run", "social", "--set", "agents=30", "--set", "ticks=5", db=db_url)["run_id"]
    Store(db_url).close()
    before, size = counts(db), db.stat().st_size
    report = cli_json("replay", run, db=db_url)
    assert report["matched"] and report["ticks"] == 5 and report["replay_run_id"] is None
    assert counts(db) == before and db.stat().st_size == size
    kept = cli_json("replay", run, "--store", db=db_url)
    assert kept["matched"] and kept["replay_run_id"]
    assert counts(db)["runs"] == before["runs"] + 1 and Store(db_url).get_run(kept["replay_run_id"]).origin == "replay"


def test_an_unstored_replay_finds_a_changed_tick(tmp_path, db_url):
    """A stored tick whose metrics were changed is reported at that tick (the comparison needs no stored replay)."""
    run = cli_json("run", "commons", "--set", "strategy=random", "--set", "months=6", db=db_url)["run_id"]
    with sqlite3.connect(tmp_path / "runs.db") as conn:
        metrics = json.loads(conn.execute("SELECT metrics FROM ticks WHERE run_id=? AND tick=4", (run,)).fetchone()[0])
        metrics["stock"] += 1
        conn.execute("UPDATE ticks SET metrics=? WHERE run_id=? AND tick=4", (json.dumps(metrics), run))
    report = replay_run(Store(db_url), run)
    assert not report["matched"] and [m["tick"] for m in report["mismatches"]] == [4]
    proc = cli("replay", run, db=db_url)
    assert proc.returncode == 1 and "tick 4" in proc.stdout
