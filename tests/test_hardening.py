"""Core hardening: every class of bad input a new user or an adversary tried, durability under
signals and concurrent first use, honest final metrics, and output people read."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scenarios.commons.limits import stated_limit
from societas import cli as cli_mod
from runner.config import build_spec
from runner.execution import execute
from sim.store.store import Store
from tests.conftest import ROOT, cli, cli_process


def main(capsys, *args: str) -> tuple[int, str, str]:
    """Run the CLI in-process (as the console script does) and return (exit code, stdout, stderr)."""
    old = sys.argv
    sys.argv = ["societas", *args]
    try:
        cli_mod.main()
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = old
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_bad(capsys, db_path: Path, *args: str, says: str) -> str:
    """Exit 2, one short line naming the problem, no traceback, nothing stored."""
    code, out, err = main(capsys, *args, "--db", f"sqlite:///{db_path}")
    assert code == 2, (out, err)
    assert says in err, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and len(err) < 600
    assert not db_path.exists() or Store(f"sqlite:///{db_path}").count_runs() == 0
    return err


# ----- 3. bad input ---------------------------------------------------------------------------
@pytest.mark.alone
def test_yaml_alias_bomb_is_refused_quickly_with_a_short_message(capsys, tmp_path):
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i, name in enumerate("bcdefghij"):
        prev = "abcdefghij"[i]
        lines.append(f"{name}: &{name} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]")
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\nfishers: *j\n")
    started = time.perf_counter()
    assert_bad(capsys, tmp_path / "r.db", "run", "commons", "--config", str(bomb), says="too large")
    assert time.perf_counter() - started < 5
    assert_bad(capsys, tmp_path / "r.db", "run", "commons", "--set", "population=[" + ", ".join(["{count: 1}"] * 3) + "]",
               "--set", "fishers=2", says="population")


@pytest.mark.parametrize("content,says", [
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "not UTF-8"),
    ("fishers: 3\n".encode("utf-16"), "not UTF-8"),
    (b"llm: 5\n", "bad value for 'llm'"),
    (b"seed: 123456789012345678901234567890\n", "bad value for 'seed'"),
    (b"fishers: true\n", "must be a number"),
    (b"capacity: .inf\n", "bad value for 'capacity'"),
    (b"capacity: 1.0e+308\n", "bad value for 'capacity'"),
])
def test_bad_config_files(capsys, tmp_path, content, says):
    cfg = tmp_path / "c.yaml"
    cfg.write_bytes(content)
    assert_bad(capsys, tmp_path / "r.db", "run", "commons", "--config", str(cfg), says=says)


@pytest.mark.parametrize("args,says", [
    (["--seed", str(2**70)], "bad value for 'seed'"),
    (["--set", "fishers=" + "9" * 5000], "--set fishers"),
    (["--set", "capacity=.inf"], "bad value for 'capacity'"),
    (["--set", "fishers=true"], "must be a number"),
    (["--policy", "llm", "--set", "llm.temperature=-1"], "bad value for 'llm.temperature'"),
    (["--policy", "llm", "--set", "llm.dtype=fp7"], "bad value for 'llm.dtype'"),
    (["--policy", "llm", "--set", "llm.device=tpu"], "bad value for 'llm.device'"),
    (["--model", "/tmp"], "--model only applies to LLM agents"),
    (["--llm", "langchain_core.language_models.fake_chat_models:FakeListChatModel"], "--llm only applies to LLM agents"),
    (["--llm-arg", "x=1"], "--llm-arg only applies to LLM agents"),
    (["--llm", "m:C", "--llm-arg", "x=1"], "--llm and --llm-arg only apply to LLM agents"),
    (["--replicas", "2"], "--replicas only applies to LLM agents"),
])
def test_bad_flags_and_values(capsys, tmp_path, args, says):
    assert_bad(capsys, tmp_path / "r.db", "run", "commons", *args, says=says)


def test_unloadable_models_are_bad_input_and_create_no_store(capsys, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    corrupt = tmp_path / "bad.gguf"
    corrupt.write_bytes(b"not a gguf" * 300)
    db = tmp_path / "r.db"
    for model, says in ((empty, "without a config.json"), (corrupt, "not a GGUF model file")):
        assert_bad(capsys, db, "run", "commons", "--policy", "llm", "--model", str(model), says=says)
    assert not db.exists()


def test_a_device_this_machine_lacks_is_bad_input_before_anything_is_stored(capsys, tmp_path):
    """`llm.device=cuda` without a GPU was refused only after the model had loaded (~30 s), with a store
    already made; a sweep stored a run per cell, each failed. Both now refuse it at once."""
    import torch

    missing = f"cuda:{torch.cuda.device_count()}"  # one past the last GPU: no machine has it
    db = tmp_path / "r.db"
    for device in ([missing] if torch.cuda.is_available() else ["cuda", missing]):
        assert_bad(capsys, db, "run", "commons", "--policy", "llm", "--set", f"llm.device={device}",
                   says=f"bad value for 'llm.device': '{device}'")
    assert not db.exists()
    sweep = tmp_path / "s.sweep.yaml"
    sweep.write_text(f"scenario: commons\npolicy: llm\nbase: {{fishers: 2, months: 1}}\nseeds: 1\nllm: {{device: '{missing}'}}\n")
    assert_bad(capsys, db, "sweep", str(sweep), says="s.sweep.yaml: bad value for 'llm.device'")
    assert not db.exists()
    sweep.write_text(sweep.read_text().replace("policy: llm", "policy: scripted"))  # no run needs the model
    code, out, err = main(capsys, "sweep", str(sweep), "--json", "--db", f"sqlite:///{db}")
    assert code == 0 and Store(f"sqlite:///{db}").count_runs() == 1, err


def test_wildcards_never_resolve_run_ids_and_reading_creates_no_store(capsys, tmp_path, db_url):
    missing = tmp_path / "nothing.db"
    for cmd in (["list"], ["show", "abc"], ["export", "abc", "--out", str(tmp_path / "x")], ["replay", "abc"]):
        assert_bad(capsys, missing, *cmd, says="no store at")
    assert not missing.exists()
    execute(build_spec("commons", ticks=1), Store(db_url))
    db = Path(db_url.removeprefix("sqlite:///"))
    for pattern in ("%", "_", "7__", "%%"):
        code, _, err = main(capsys, "show", pattern, "--db", db_url)
        assert code == 2 and "unknown run id" in err, err
    code, _, err = main(capsys, "replay", "_", "--db", db_url)
    assert code == 2 and "unknown run id" in err
    assert Store(db_url).count_runs() == 1 and db.exists()


def test_export_to_a_file_or_an_unwritable_place_is_bad_input(capsys, tmp_path, db_url):
    run = execute(build_spec("commons", ticks=1), Store(db_url))
    afile = tmp_path / "f.txt"
    afile.write_text("x")
    for out_dir, says in ((afile, "is a file"), (afile / "sub", "cannot create folder"), (Path("/proc/nope"), "cannot create folder")):
        code, _, err = main(capsys, "export", run.run_id, "--out", str(out_dir), "--db", db_url)
        assert code == 2 and says in err and "Traceback" not in err, err


# ----- 2. final metrics that say what they are -----------------------------------------------
def test_final_metrics_are_whole_run_figures_apart_from_the_tick_table(store):
    r = execute(build_spec("commons", seed=1, sets=["strategy=fixed", "catch=12"]), store)
    assert r.metrics["total_gain"] == pytest.approx(160) and "catch_total" not in r.metrics
    ticks = store.ticks(r.run_id)
    assert ticks[-1].metrics["catch_total"] == pytest.approx(40)
    assert store.get_run(r.run_id).final_metrics == r.metrics

    r = execute(build_spec("commons", seed=0, ticks=4, sets=["talk=true", "sanctions=true",
                "population=[{count: 4, strategy: sustainable}, {count: 1, strategy: greedy}]"]), store)
    per_tick = [t.metrics for t in store.ticks(r.run_id)]
    for k in ("norm_sanctions", "norm_violations", "norm_statements"):
        assert r.metrics[k] == sum(m[k] for m in per_tick)
    assert r.metrics["norm_sanctions"] > 0 and per_tick[-1]["norm_sanctions"] < r.metrics["norm_sanctions"]


def test_non_finite_final_metrics_are_reported_as_null():
    from runner.execution import final_summary

    class M:
        tick = 3

        def summary(self):
            return {"ok": 1.5, "bad": float("nan"), "worse": float("inf"), "none": None}

    out = final_summary(M())  # type: ignore[arg-type]
    assert out == {"ok": 1.5, "bad": None, "worse": None, "none": None}
    json.dumps(out, allow_nan=False)


def test_every_metric_is_documented():
    from scenarios import REGISTRY

    for name, cls in REGISTRY.items():
        spec = build_spec(name, ticks=2)
        r = execute(spec, Store("sqlite://"))
        docs = cls.metric_docs()["final"]
        assert set(r.metrics) <= set(docs), (name, set(r.metrics) - set(docs))


# ----- 4. durability and concurrency ---------------------------------------------------------
def test_concurrent_first_use_of_a_new_sqlite_store(tmp_path):
    """Six processes start at once on a database file that does not exist yet: all succeed."""
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    procs = [subprocess.Popen([sys.executable, "-m", "societas.cli", "run", "commons", "--ticks", "2", "--seed", str(i),
                               "--json", "--db", url], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(6)]
    results = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [e for _, e in results]
    assert Store(url).count_runs() == 6


def test_a_reader_in_another_process_never_loses_a_running_writers_commits(tmp_path):
    """A run writes a new SQLite store while another process (a notebook, the app) opens and closes
    plain connections to it: every tick and the final status are there at the end. (The writer once
    dropped its own SQLite locks when it created the schema, so a closing reader deleted its WAL.)"""
    import sqlite3

    db = tmp_path / "runs.db"
    months = 3000
    proc = subprocess.Popen([sys.executable, "-m", "societas.cli", "run", "commons", "--policy", "scripted", "--set",
                             f"months={months}", "--set", "fishers=50", "--db", f"sqlite:///{db}"],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    reads = 0
    while proc.poll() is None:
        if db.exists():
            try:
                con = sqlite3.connect(db)
                con.execute("SELECT count(*) FROM sqlite_master").fetchone()
                con.close()
                reads += 1
            except sqlite3.OperationalError:
                pass
        time.sleep(0.05)
    assert proc.returncode == 0, proc.stderr.read()
    assert reads >= 5  # the reader really ran beside the writer
    run = Store(f"sqlite:///{db}").list_runs()[0]
    assert (run.status, run.ticks) == ("finished", months)
    assert len(Store(f"sqlite:///{db}").ticks(run.id)) == months


def test_after_a_command_the_database_file_alone_holds_every_commit(tmp_path):
    """The CLI closes its store at exit, so SQLite folds the write-ahead log into runs.db: a copy of
    that one file (what a user mails or uploads) has the whole run, and no -wal file is left."""
    import shutil
    import sqlite3

    db = tmp_path / "runs.db"
    proc = cli_process("run", "commons", "--policy", "scripted", "--set", "months=7", "--set", "fishers=20", "--json",
                       db=f"sqlite:///{db}")  # what a process leaves when it ends: a real one
    assert proc.returncode == 0, proc.stderr
    run_id = json.loads(proc.stdout)["run_id"]
    wal = tmp_path / "runs.db-wal"
    assert not wal.exists() or wal.stat().st_size == 0
    (tmp_path / "copy").mkdir()
    shutil.copy(db, tmp_path / "copy" / "runs.db")
    con = sqlite3.connect(tmp_path / "copy" / "runs.db")
    assert con.execute("SELECT status, ticks FROM runs WHERE id = ?", (run_id,)).fetchone() == ("finished", 7)
    assert con.execute("SELECT count(*) FROM agent_steps WHERE run_id = ?", (run_id,)).fetchone() == (140,)
    con.close()
    assert cli_process("show", run_id, "--json", db=f"sqlite:///{db}").returncode == 0  # a reading command leaves it whole too
    assert not wal.exists() or wal.stat().st_size == 0


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_sigterm_and_sighup_store_the_run_as_interrupted(db_url, sig, code):
    proc = subprocess.Popen([sys.executable, "-m", "societas.cli", "run", "commons", "--set", "months=100000",
                             "--set", "fishers=50", "--db", db_url], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = Store(db_url)
    deadline = time.time() + 90
    while time.time() < deadline and not (store.list_runs() and store.list_runs()[0].ticks >= 2):
        time.sleep(0.2)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code and "interrupted" in err and "Traceback" not in err
    run = store.list_runs()[0]
    assert run.status == "failed" and run.reason.startswith("interrupted") and len(store.ticks(run.id)) == run.ticks >= 2


def test_a_killed_run_shows_as_stale_and_replays_as_an_incomplete_prefix(capsys, db_url):
    proc = subprocess.Popen([sys.executable, "-m", "societas.cli", "run", "commons", "--set", "months=100000",
                             "--set", "fishers=20", "--set", "strategy=random", "--db", db_url], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    store = Store(db_url)
    deadline = time.time() + 90
    while time.time() < deadline and not (store.list_runs() and store.list_runs()[0].ticks >= 3):
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    run = store.list_runs()[0]
    assert run.status == "running"
    code, out, _ = main(capsys, "list", "--json", "--db", db_url)
    row = json.loads(out)[0]
    assert row["live"] == "stale" and row["status_text"].startswith("stale")
    code, out, _ = main(capsys, "replay", run.id, "--json", "--store", "--db", db_url)  # (stored on request only)
    report = json.loads(out)
    assert code == 0 and report["matched"] and report["incomplete"] and report["ticks"] == len(store.ticks(run.id))
    assert store.get_run(report["replay_run_id"]).status == "stopped"


# ----- 5. output people read ----------------------------------------------------------------
def test_exports_are_byte_identical_and_empty_tables_keep_their_columns(capsys, tmp_path, db_url):
    import pandas as pd

    run = execute(build_spec("commons", ticks=2), Store(db_url))
    for fmt in ("csv", "parquet"):
        for d in ("a", "b"):
            code, _, err = main(capsys, "export", run.run_id, "--format", fmt, "--out", str(tmp_path / d / fmt), "--db", db_url)
            assert code == 0, err
        for name in ("runs", "ticks", "agent_steps", "events", "llm_calls"):
            a, b = tmp_path / "a" / fmt / f"{name}.{fmt}", tmp_path / "b" / fmt / f"{name}.{fmt}"
            assert a.read_bytes() == b.read_bytes(), name
        calls = pd.read_csv(tmp_path / "a" / fmt / "llm_calls.csv") if fmt == "csv" else pd.read_parquet(tmp_path / "a" / fmt / "llm_calls.parquet")
        assert len(calls) == 0 and {"key", "prompt", "answer", "tokens_in"} <= set(calls.columns)


def test_list_shows_who_decided_and_marks_replays_and_cached_reruns(store):
    from agents.llm.cache import CachedBackend
    from agents.llm.backend import Answer, LLMBackend
    from agents.scripted import ScriptedBackend
    from analysis.summary import run_row
    from scenarios import get_scenario

    class Fixed:
        model_id, sampling = "fixed", {}

        def answer(self, requests, messages):
            return [Answer(value=r.default) for r in requests]

    spec = build_spec("commons", policy="llm", ticks=2, sets=["population=[{count: 4}, {count: 1, policy: scripted, strategy: greedy}]"])
    strategies = get_scenario("commons").strategies

    def backends():
        return {"scripted": ScriptedBackend(strategies), "llm": CachedBackend(LLMBackend("fixed", {}, llm=Fixed()), store)}

    first = execute(spec, store, backends=backends())
    again = execute(spec, store, backends=backends())
    rows = {r.id: run_row(r) for r in store.list_runs()}
    assert rows[first.run_id]["decided_by"] == "llm+scripted"
    assert not rows[first.run_id]["cached"] and rows[again.run_id]["cached"]


def test_show_prints_every_metric_and_a_ticks_messages(capsys, db_url):
    r = execute(build_spec("commons", ticks=2, sets=["talk=true"]), Store(db_url))
    code, out, _ = main(capsys, "show", r.run_id, "--tick", "2", "--db", db_url)
    assert code == 0
    for k in r.metrics:
        assert k in out
    assert "fallback decisions: 0" in out and "[message] agent" in out
    code, out, _ = main(capsys, "show", r.run_id, "--tick", "1", "--json", "--db", db_url)
    data = json.loads(out)
    assert data["fallbacks"] == 0 and len(data["messages"]) == 5 and data["decided_by"] == "scripted"
    quiet = execute(build_spec("commons", ticks=2), Store(db_url))  # no norm: its rate and limit are missing
    assert quiet.metrics["norm_compliance_rate"] is None
    code, out, _ = main(capsys, "show", quiet.run_id, "--db", db_url)
    row = next(line for line in out.splitlines() if "norm_compliance_rate" in line)
    assert code == 0 and "null" in row and "None" not in out  # the word the docs and --json use


def test_stated_limit_reads_the_limit_not_the_first_number():
    assert stated_limit("As one of 3 fishers, I propose each of us catches at most 8 tons.") == 8
    assert stated_limit("We are 5 fishers in month 2; let's take 6 tons each.") == 6
    assert stated_limit("I plan to catch 10 tons.") == 10
    assert stated_limit("There are 3 of us and it is month 4.") is None
    assert stated_limit("Limit of 12 per fisher please") == 12


def test_version_scenarios_bounds_and_piping_into_head(capsys):
    code, out, _ = main(capsys, "--version")
    assert code == 0 and out.startswith("societas ")
    code, out, _ = main(capsys, "scenarios", "--json")
    commons = next(s for s in json.loads(out) if s["name"] == "commons")
    fishers = next(f for f in commons["fields"] if f["name"] == "fishers")
    assert ">= 1" in fishers["bounds"] and any(f["name"] == "llm.temperature" for f in commons["llm_fields"])
    assert "total_gain" in commons["final_metrics"] and "catch_total" in commons["tick_metrics"]
    proc = subprocess.run(f"{sys.executable} -m societas.cli scenarios | head -1", shell=True, cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


# ----- 1. per-agent cost and storage ----------------------------------------------------------
def test_scripted_agents_store_no_memory_and_relationships_stay_bounded(store):
    from sim.contracts.memory import Memory

    r = execute(build_spec("commons", ticks=2, sets=["fishers=50", "sanctions=true", "social_learning=true"]), store)
    assert all(s.memory is None for s in store.steps(r.run_id))
    m = Memory(max_peers=16)
    for peer in range(1000):
        m.relate(peer, 0.5 if peer % 2 else -0.3)
    assert len(m.relationships) <= 16
    v = m.version
    assert m.snapshot() and m.version == v  # a snapshot does not count as a change


def test_rationing_gives_out_exactly_the_stock_and_scales(store):
    r = execute(build_spec("commons", seed=3, ticks=1, sets=["fishers=2000", "strategy=fixed", "catch=1", "capacity=1500"]), store)
    pays = [s.payoff for s in store.steps(r.run_id)]
    assert sum(pays) == pytest.approx(1500) and set(pays) == {0.0, 1.0}
