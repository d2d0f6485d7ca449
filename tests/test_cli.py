"""The command line as a user meets it: JSON output, listing, export, and bad input."""


import pytest

from tests.conftest import cli, cli_json
from sim.store.store import Store


def test_run_json_reports_govsim_case(db_url):
    """`run --json` prints one object with the GovSim figures for 5 x 12 tons."""
    out = cli_json("run", "commons", "--policy", "scripted", "--set", "strategy=fixed", "--set", "catch=12", "--seed", "1", db=db_url)
    assert set(out) == {"run_id", "scenario", "status", "ticks", "fallbacks", "metrics"}
    assert out["fallbacks"] == 0
    assert out["status"] == "collapsed" and out["ticks"] == 3
    assert out["metrics"]["survival_time"] == 3
    assert out["metrics"]["gain"] == pytest.approx(32)
    assert out["metrics"]["efficiency"] == pytest.approx(160 / 600)


def test_list_show_export(db_url, tmp_path):
    """A stored run appears in `list`, `show` reports it, `export` writes csv and parquet tables."""
    run = cli_json("run", "commons", "--ticks", "3", db=db_url)
    runs = cli_json("list", db=db_url)
    assert [r["run_id"] for r in runs] == [run["run_id"]]
    assert {"run_id", "scenario", "status", "seed", "ticks"} <= set(runs[0])
    shown = cli_json("show", run["run_id"][:6], db=db_url)
    assert shown["run_id"] == run["run_id"] and len(shown["per_tick"]) == 3
    for fmt in ("csv", "parquet"):
        proc = cli("export", run["run_id"], "--format", fmt, "--out", str(tmp_path / fmt), db=db_url)
        assert proc.returncode == 0, proc.stderr
        assert (tmp_path / fmt / f"agent_steps.{fmt}").stat().st_size > 0
    import pandas as pd

    steps = pd.read_parquet(tmp_path / "parquet" / "agent_steps.parquet")
    assert len(steps) == 15 and set(steps["tick"]) == {1, 2, 3}


def test_list_at_80_columns_breaks_no_word(db_url):
    """On an 80-column terminal `list` wraps a cell between words, never inside one ("commo/ns")."""
    run = cli_json("run", "commons", "--ticks", "2", db=db_url)
    assert cli("fork", run["run_id"], "--at", "1", "--set", "months=3", db=db_url).returncode == 0
    proc = cli("list", db=db_url, columns=80)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    words = {w for line in lines for w in line.split()}
    fork = next(r for r in cli_json("list", db=db_url) if r["origin"] == "fork")
    assert {run["run_id"], fork["run_id"], "commons", "finished", "scripted", fork["created_at"][:10]} <= words


def test_list_columns_fit_the_screen_and_give_way_between_words():
    """Widths for `list`: whole words where they can fit; a file-path scenario and a stale run's host name
    fold instead of pushing `created` and `ticks` off an 80-column screen."""
    from societas.cli import fit_widths

    headers = ("run_id", "scenario", "status", "decided by", "origin", "seed", "ticks", "created")
    fork = ("210ef168e8f2", "commons", "finished", "llm+scripted", "fork of c0838f4abe00", "0", "5", "2026-11-23 12:01")
    widths = fit_widths(headers, [fork], 80, shrink=(1, 2, 3, 4, 7))
    assert sum(widths) + len(widths) - 1 <= 80
    assert all(w >= max(len(word) for word in cell.split()) for w, cell in zip(widths, fork))  # no word broken
    assert fit_widths(headers, [fork], 200, shrink=(1, 2, 3, 4, 7)) == [max(len(h), len(c)) for h, c in zip(headers, fork)]
    stale = ("c0838f4abe00", "/home/user/projects/my_scenarios/lake.py:Lake",
             "stale (was running; pid 12345 on ip-10-0-12-34.eu-west-1.compute.internal is gone; last tick 3)",
             "scripted", "run", "1234567", "3", "2026-11-23 12:00")
    widths = fit_widths(headers, [stale, fork], 80, shrink=(1, 2, 3, 4, 7))
    assert sum(widths) + len(widths) - 1 <= 80
    assert widths[0] == 12 and widths[5] == 7 and widths[6] == 5 and widths[7] >= 10  # id, seed, ticks, date kept whole
    assert fit_widths(headers, [], 80, shrink=(1, 2, 3, 4, 7)) == [len(h) for h in headers]


def test_scenarios_lists_fields_and_defaults():
    data = cli_json("scenarios")
    commons = next(s for s in data if s["name"] == "commons")
    fields = {f["name"]: f["default"] for f in commons["fields"]}
    assert fields["fishers"] == 5 and fields["months"] == 12 and fields["strategy"] == "sustainable"


BAD = [
    (["run", "nosuch"], "unknown scenario 'nosuch'; valid: cleanup, commons"),
    (["run", "commons", "--set", "colour=blue"], "unknown config field 'colour'; valid fields:"),
    (["run", "commons", "--set", "fishers=many"], "bad value for 'fishers'"),
    (["run", "commons", "--set", "fishers=0"], "bad value for 'fishers'"),
    (["run", "commons", "--set", "strategy=lazy"], "'sustainable', 'greedy', 'fixed', 'random' or 'conditional'"),
    (["run", "commons", "--set", "reward_mode=selfish"], "bad value for 'reward_mode'"),
    (["run", "commons", "--set", "nokey"], "--set expects key=value"),
    (["run", "commons", "--policy", "oracle"], "valid: scripted, llm"),
    (["show", "feedbeef"], "no store at"),
]


@pytest.mark.parametrize("args,message", BAD)
def test_bad_input_exits_2_with_one_line_and_writes_nothing(args, message, db_url, tmp_path):
    """Bad input: exit 2, one line naming the problem, no traceback, no run stored."""
    proc = cli(*args, db=db_url)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert Store(db_url).count_runs() == 0


def test_malformed_yaml_and_missing_file(db_url, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("fishers: [1, 2\nmonths: 3\n")
    proc = cli("run", "commons", "--config", str(bad), db=db_url)
    assert proc.returncode == 2 and "malformed YAML" in proc.stderr and "Traceback" not in proc.stderr
    proc = cli("run", "commons", "--config", str(tmp_path / "none.yaml"), db=db_url)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_unopenable_database_url(tmp_path):
    for url in ("sqlite:////nonexistent/dir/runs.db", "nosuchdb://x", "postgresql+nosuchdriver://u@h/db"):
        proc = cli("run", "commons", "--ticks", "1", db=url)
        assert proc.returncode == 2, proc.stderr
        assert "cannot open database" in proc.stderr and "Traceback" not in proc.stderr


def test_yaml_config_file_and_flags_override(db_url, tmp_path):
    """A YAML file sets fields (and seed); --set and --seed override it."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("strategy: fixed\ncatch: 20\nseed: 5\n")
    out = cli_json("run", "commons", "--config", str(cfg), db=db_url)
    assert out["status"] == "collapsed"
    out = cli_json("run", "commons", "--config", str(cfg), "--set", "catch=10", "--seed", "9", "--ticks", "2", db=db_url)
    assert out["status"] == "finished" and out["ticks"] == 2
    assert cli_json("show", out["run_id"], db=db_url)["seed"] == 9


def test_unknown_chat_model_class_is_bad_input(db_url):
    """An --llm class that cannot be imported exits 2 and stores no run."""
    proc = cli("run", "commons", "--policy", "llm", "--llm", "nosuchpkg.chat:Model", db=db_url)
    assert proc.returncode == 2 and "cannot import chat model" in proc.stderr and "Traceback" not in proc.stderr
    assert Store(db_url).count_runs() == 0


def test_missing_local_model_path_is_bad_input(db_url, tmp_path):
    """--model pointing nowhere exits 2 before any run is stored."""
    proc = cli("run", "commons", "--policy", "llm", "--model", str(tmp_path / "nope.gguf"), db=db_url)
    assert proc.returncode == 2 and "neither a model directory nor a .gguf file" in proc.stderr
    assert Store(db_url).count_runs() == 0


def test_ctrl_c_marks_the_run_failed_without_a_traceback(db_url):
    """SIGINT during a run: exit 130, one line, the run stored as failed/interrupted with its ticks."""
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT

    proc = subprocess.Popen([sys.executable, "-m", "societas.cli", "run", "commons", "--set", "months=100000",
                             "--set", "fishers=50", "--db", db_url], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = Store(db_url)
    deadline = time.time() + 60
    while time.time() < deadline and not (store.list_runs() and store.list_runs()[0].ticks >= 2):
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "interrupted" in err and "Traceback" not in err
    run = store.list_runs()[0]
    assert run.status == "failed" and run.reason == "interrupted (SIGINT)" and len(store.ticks(run.id)) == run.ticks >= 2
