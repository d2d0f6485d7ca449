"""docs/tutorial.md, executed: its files written to a fresh folder, its commands run as a user would.

Every fenced block with `title="FILE"` is written to FILE; every `societas ...` and `python ...`
line of a `bash` block runs in that folder (`societas` as `python -m societas.cli` would, in this
process: tests/inprocess.py, or as a subprocess with $SOCIETAS_TEST_CLI=process; `python` as a
subprocess; `<RUN_ID>` replaced by the id the run printed); `sh` blocks (the LLM, the app) are not run.
Then the stored run is read the way the app reads it (sim.store.queries, the app's scenario lookup).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import inprocess
from tests.conftest import CLI_IN_PROCESS

ROOT = Path(__file__).resolve().parents[1]
TUTORIAL = ROOT / "docs" / "tutorial.md"
FENCE = re.compile(r"^```(\w+)([^\n]*)\n(.*?)^```\s*$", re.M | re.S)


def blocks() -> list[tuple[str, str, str]]:
    """(language, title or "", body) of every fenced block, in order."""
    out = []
    for lang, info, body in FENCE.findall(TUTORIAL.read_text()):
        title = re.search(r'title="([^"]+)"', info)
        out.append((lang, title.group(1) if title else "", body))
    return out


def commands() -> list[str]:
    return [line.strip() for lang, title, body in blocks() if lang == "bash" and not title
            for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]


def _sh(folder: Path, line: str, run_id: str) -> subprocess.CompletedProcess:
    args = shlex.split(line.replace("<RUN_ID>", run_id))
    if args[0] == "societas" and CLI_IN_PROCESS:  # the tutorial's default store: runs.db in the folder
        return inprocess.run(args[1:], env={"COLUMNS": "200", "SOCIETAS_DB": None}, cwd=folder, timeout=300)
    if args[0] == "societas":
        args = [sys.executable, "-m", "societas.cli", *args[1:]]
    elif args[0] == "python":
        args = [sys.executable, *args[1:]]
    else:
        raise AssertionError(f"the tutorial runs only societas and python commands, not {line!r}")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    env.pop("SOCIETAS_DB", None)  # the tutorial's default store: runs.db in the folder
    return subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


def test_the_tutorial_blocks_are_what_the_test_expects():
    """The page has the files and the commands this test relies on (a renamed file would fail here first)."""
    titles = {t for _, t, _ in blocks() if t}
    assert {"public_goods.py", "my_strategies.py", "public_goods.yaml", "study.py", "my_prompts.py"} <= titles
    ran = commands()
    assert any(c.startswith("societas run public_goods.py:PublicGoods") for c in ran)
    assert any(c.startswith("societas show <RUN_ID>") for c in ran) and "python study.py" in ran


@pytest.mark.slow
def test_the_tutorial_runs_end_to_end_and_its_run_appears_in_the_app(tmp_path):
    """Write the files, run every command; the run is stored finished with the tutorial's metrics and
    strategies, `show`/`replay`/`export` work from the stored reference, and the app's reads find it."""
    folder = tmp_path / "pgg"
    folder.mkdir()
    for _, title, body in blocks():
        if title:
            (folder / title).write_text(body)
    run_id = ""
    outputs = {}
    for line in commands():
        proc = _sh(folder, line + (" --json" if line.startswith("societas run ") else ""), run_id)
        assert proc.returncode == 0, (line, proc.stderr[-2000:])
        outputs[line] = proc.stdout
        if line.startswith("societas run "):
            res = json.loads(proc.stdout)
            run_id = res["run_id"]
            assert res["status"] == "finished" and res["ticks"] == 12
            assert res["scenario"] == f"{folder / 'public_goods.py'}:PublicGoods"
            assert set(res["metrics"]) >= {"mean_contribution_rate", "welfare_ratio", "perolat_efficiency", "perolat_equality"}
            assert 0 < res["metrics"]["mean_contribution_rate"] < 1  # a free rider among contributors
    assert "contribution_rate" in outputs["societas scenarios public_goods.py:PublicGoods"]
    assert "every tick matched" in outputs["societas replay <RUN_ID>"]
    show = outputs["societas show <RUN_ID>"]
    assert "welfare_ratio" in show and "1 if all always give all" in show and "contribution_rate" in show
    assert "my_strategies.py:generous" in show  # the config, with the strategy's stored reference
    assert (folder / "exported" / "ticks.csv").exists()
    study = outputs["python study.py"].splitlines()
    assert [line.split()[:2] for line in study[:3]] == [["1.2", "finished"], ["1.6", "finished"], ["3.0", "finished"]]
    rates = {float(line.split()[2]) for line in study[:3]}
    assert len(rates) == 1 and 0 < min(rates) < 1  # the strategies do not read the multiplier
    for line in study[:3]:  # welfare / best = (1 + (m - 1) x contribution rate) / m
        m, rate, ratio = float(line.split()[0]), float(line.split()[2]), float(line.split()[3])
        assert ratio == pytest.approx((1 + (m - 1) * rate) / m, abs=2e-3)
    assert "contribution_rate" in study[3] and "payoff" in outputs["python study.py"]

    # the app's reads: the runs table, the run, its ticks and agents, the scenario class from the stored reference
    from sim.store import queries
    from app_pages.common import metric_docs, scenario_class

    engine = queries.open_reader(f"sqlite:///{folder / 'runs.db'}")
    table = queries.list_runs(engine)
    mine = table[table["run_id"] == run_id].iloc[0].to_dict()
    assert mine["scenario"].endswith("public_goods.py:PublicGoods") and mine["status"] == "finished"
    assert len(table) == 1 + 3  # the run and the study's three (a replay stores nothing unless --store)
    ticks = queries.tick_frame(engine, run_id)
    assert len(ticks) == 12 and {"contribution_rate", "pot"} <= set(ticks.columns)
    assert ((ticks["contribution_rate"] >= 0) & (ticks["contribution_rate"] <= 1)).all()
    stats = queries.agent_tick_stats(engine, run_id)
    assert len(stats) > 0
    assert scenario_class(mine["scenario"]).name == "public_goods"
    assert metric_docs(mine, final=True)["welfare_ratio"].startswith("total payoff")
    run = queries.get_run(engine, run_id)
    strategies = [g["strategy"] for g in run["spec"]["config"]["population"]]
    assert strategies == ["conditional", f"{folder / 'my_strategies.py'}:generous", "free_rider"]


@pytest.mark.slow
def test_the_app_renders_the_tutorial_run(tmp_path, monkeypatch):
    """The Streamlit app's run page shows a run of the tutorial's scenario, charts included, with no error."""
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    import sim

    folder = tmp_path / "pgg"
    folder.mkdir()
    for _, title, body in blocks():
        if title:
            (folder / title).write_text(body)
    monkeypatch.chdir(folder)
    url = f"sqlite:///{folder / 'runs.db'}"
    result = sim.run("public_goods.py:PublicGoods", db=url, config_file="public_goods.yaml", seed=1)
    monkeypatch.setenv("SOCIETAS_DB", url)
    monkeypatch.setattr(sys, "argv", ["app.py", "--allow-write", "--allow-code"])  # (`societas app --allow-write ...`)
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60).run()
    for page in ("run", "agents"):
        at.query_params["run"] = result.run_id
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception and not at.error, (page, [e.value for e in (*at.exception, *at.error)])
    at.switch_page("app_pages/run.py").run()
    assert at.title[0].value == f"Run {result.run_id}"
    page = " ".join(str(getattr(e, "value", "")) for e in at.main)
    assert "public_goods.py:PublicGoods" in page

    # the Launch page offers the stored user scenario, refuses a bad reference, and starts a run of it
    at.switch_page("app_pages/launch.py").run()
    assert any(o.startswith(result.spec.scenario + " — ") for o in at.selectbox[0].options)
    at.text_input(key="launch.__reference").set_value("nowhere.py:Nothing").run()
    assert at.error and "does not exist" in at.error[0].value
    at.text_input(key="launch.__reference").set_value(result.spec.scenario).run()
    assert at.selectbox[0].value == result.spec.scenario and not at.error
    at.number_input(key=f"launch.{result.spec.scenario}.__seed").set_value(5)
    at.button[0].click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    from sim.store.store import Store

    store = Store(url)
    deadline = time.time() + 60
    launched = []
    while time.time() < deadline and not launched:
        launched = [r for r in store.list_runs() if r.seed == 5 and r.status != "running"]
        time.sleep(0.3)
    assert launched and launched[0].status == "finished" and launched[0].scenario == result.spec.scenario


@pytest.mark.slow
def test_the_llm_commands_run_with_a_stand_in_chat_model(tmp_path, monkeypatch, capsys):
    """The `sh` blocks' LLM runs, with a deterministic stand-in chat model instead of SmolLM2 (fast):
    they finish, and the tutorial's prompt template is the one every prompt used."""
    from societas.cli import main
    from sim.store.store import Store

    folder = tmp_path / "pgg"
    folder.mkdir()
    for _, title, body in blocks():
        if title:
            (folder / title).write_text(body)
    monkeypatch.chdir(folder)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("SOCIETAS_DB", raising=False)
    lines = [line.strip() for lang, title, body in blocks() if lang == "sh" and not title
             for line in body.splitlines() if line.strip().startswith("societas run")]
    assert len(lines) == 2 and all("--policy llm" in line for line in lines)
    for line in lines:
        args = shlex.split(line)[1:] + ["--llm", "tests.fakechat:HashChat", "--json"]
        monkeypatch.setattr(sys, "argv", ["societas", *args])
        with pytest.raises(SystemExit) as exc:
            main()
        out = capsys.readouterr()
        assert exc.value.code in (0, None), out.err
        res = json.loads(out.out)
        assert res["status"] == "finished" and res["ticks"] == 3
    store = Store(f"sqlite:///{folder / 'runs.db'}")
    runs = {r.spec["llm"].get("template"): r for r in store.list_runs()}
    assert set(runs) == {None, f"{folder / 'my_prompts.py'}:ECONOMIST"}
    for template, run in runs.items():
        prompts = [c.prompt for c in store.llm_calls(run.id)]
        assert len(prompts) == 3 * (6 if template is None else 4)  # the config file's 6 players, else the default 4
        economist = [p.startswith("[system] You are a player in an economics experiment.") for p in prompts]
        assert all(economist) if template else not any(economist)
        assert all("How many coins do you put into the pot?" in p for p in prompts)
