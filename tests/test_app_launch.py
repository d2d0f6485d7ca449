"""The Launch page's other ways in (a YAML run config, a sweep file, a fork of the open run, LLM options on the form),
its links to what it started, and the Runs list's config columns, search and URL filters.

Fast tests run the launched `python -m sim.cli ...` command in this process (`InlineCli`: the real CLI, no new
interpreter) or only record it (`Recorder`); one slow test starts real background processes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, Optional

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from analysis import configs, launcher, queries  # noqa: E402
from sim.runner.config import build_spec  # noqa: E402
from sim.runner.execution import execute  # noqa: E402
from sim.store.store import Store  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
SCRIPTED = (ROOT / "scenarios/commons/configs/scripted.yaml").read_text()


class Recorder:
    """Stands in for subprocess.Popen: records the command and runs nothing (the process is 'still running')."""

    calls: list[list[str]] = []

    def __init__(self, cmd: list[str], **kwargs: Any) -> None:
        assert cmd[:3] == [sys.executable, "-m", "sim.cli"]
        self.args = cmd
        Recorder.calls.append(list(cmd))

    def poll(self) -> Optional[int]:
        return None


class InlineCli(Recorder):
    """Stands in for subprocess.Popen: runs the `python -m sim.cli ARGS` command with the real CLI in this process."""

    def __init__(self, cmd: list[str], stdout: Any = None, stderr: Any = None, **kwargs: Any) -> None:
        super().__init__(cmd)
        from typer.testing import CliRunner

        from sim.cli import app

        result = CliRunner().invoke(app, cmd[3:])
        stdout.write(result.stdout)
        stderr.write(result.stderr + (f"\nerror: {result.exception}" if result.exception else ""))
        self.returncode = result.exit_code

    def poll(self) -> Optional[int]:
        return self.returncode


class Refuse(Recorder):
    """Stands in for subprocess.Popen where nothing may start."""

    def __init__(self, cmd: list[str], **kwargs: Any) -> None:
        raise AssertionError(f"started {cmd}")


def _app(url: str, monkeypatch, popen: type = InlineCli, page: str = "launch", **params: str) -> AppTest:
    """The app on `url` started to launch (--allow-write) any code reference typed in (--allow-code)."""
    monkeypatch.setenv("SOCIETAS_DB", url)
    monkeypatch.setattr(sys, "argv", ["app.py", "--allow-write", "--allow-code"])
    monkeypatch.setattr(launcher.tempfile, "tempdir", str(Path(url.removeprefix("sqlite:///")).parent))  # launch folders
    monkeypatch.setattr(launcher.subprocess, "Popen", popen)
    Recorder.calls = []
    at = AppTest.from_file(APP, default_timeout=60)
    for k, v in params.items():
        at.query_params[k] = v
    at.run()
    if page != "runs":
        at.switch_page(f"app_pages/{page}.py").run()
    return at


def _button(at: AppTest, label: str):
    return next(b for b in at.button if b.label == label)


def _errors(at: AppTest) -> list[str]:
    return [e.value for e in at.error]


def _launches(at: AppTest) -> list:
    return at.session_state["launches"] if "launches" in at.session_state else []


def _links(at: AppTest) -> list[tuple[str, str, str]]:
    return [(p.proto.page, p.proto.label, p.proto.query_string) for p in at.get("page_link")]


def _progress(at: AppTest) -> list[str]:
    return [p.proto.text for p in at.get("progress")]


# ----- a run from a YAML config -------------------------------------------------------------------------
def test_an_uploaded_yaml_config_starts_that_run_and_links_to_it(tmp_path, monkeypatch):
    """An uploaded config (scenarios/commons/configs/scripted.yaml, shortened) runs as `societas run --config` would;
    once stored, the page links to the run."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    at = _app(url, monkeypatch)
    text = SCRIPTED.replace("months: 12", "months: 2").replace("seed: 0", "seed: 5").replace("fishers: 5", "fishers: 4")
    at.file_uploader(key="launch.config.file").upload("scripted.yaml", text.encode(), "application/x-yaml")
    at.run()
    _button(at, "Start run from YAML").click().run()
    assert not at.exception and not _errors(at), _errors(at)
    (cmd,) = Recorder.calls
    assert cmd[3:5] == ["run", "commons"] and "--config" in cmd and cmd[cmd.index("--db") + 1] == url
    eng = queries.open_reader(url)
    (run,) = queries.list_runs(eng).to_dict("records")
    assert (run["seed"], run["ticks"], run["status"], run["config"]["fishers"]) == (5, 2, "finished", 4)
    at.run()
    assert any(label == f"Open run {run['run_id']}" and q == f"run={run['run_id']}" for _, label, q in _links(at)), \
        _links(at)
    assert any("2/2 ticks" in t for t in _progress(at))


BAD_CONFIGS = [
    ("", "No config"),
    ("# only a comment\n", "empty"),
    ("- months: 2\n- fishers: 3\n", "mapping"),
    ("months: [2\n", "malformed YAML"),
    ("scenario: atlantis\nmonths: 2\n", "unknown scenario 'atlantis'"),
    ("months: 0\n", "'months'"),
    ("monthz: 2\n", "unknown config field 'monthz'"),
    ("policy: oracle\n", "'policy'"),
]


def test_bad_yaml_configs_are_one_error_each_and_start_nothing(tmp_path, monkeypatch):
    """Empty, a list, malformed, an unknown scenario, a bad or unknown field: one error line; no process, no store."""
    path = tmp_path / "runs.db"
    at = _app(f"sqlite:///{path}", monkeypatch, popen=Refuse)
    for text, expected in BAD_CONFIGS:
        at.text_area(key="launch.config.text").set_value(text)
        _button(at, "Start run from YAML").click().run()
        assert not at.exception, text
        assert len(at.error) == 1 and expected in at.error[0].value, (text, _errors(at))
    assert not _launches(at) and not path.exists()


# ----- a sweep --------------------------------------------------------------------------------------------
SWEEP = """scenario: commons
policy: scripted
seeds: 2
base: {fishers: 3, months: 2}
grid:
  sanctions: [false, true]
"""


def test_a_sweep_file_runs_as_societas_sweep_with_progress_in_runs(tmp_path, monkeypatch):
    """A pasted sweep file becomes `societas sweep FILE --db URL`; its progress counts its ended runs out of its total,
    and links to the Runs list filtered to it."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    at = _app(url, monkeypatch)
    at.text_area(key="launch.sweep.text").set_value(SWEEP)
    at.number_input(key="launch.sweep.workers").set_value(1)
    _button(at, "Start sweep").click().run()
    assert not at.exception and not _errors(at), _errors(at)
    (cmd,) = Recorder.calls
    assert cmd[3] == "sweep" and cmd[cmd.index("--workers") + 1] == "1" and cmd[cmd.index("--db") + 1] == url
    (item,) = _launches(at)
    table = queries.list_runs(queries.open_reader(url))
    assert len(table) == 4 and set(table["sweep_id"]) == {item.sweep_id} and set(table["status"]) == {"finished"}
    at.run()
    assert any(f"sweep {item.sweep_id}" in t and "finished, 4/4 runs" in t for t in _progress(at)), _progress(at)
    assert any(label == f"Runs of sweep {item.sweep_id}" and q == f"q={item.sweep_id}" for _, label, q in _links(at))


@pytest.mark.parametrize("text, expected", [
    ("", "No sweep file"),
    ("[1, 2]\n", "mapping"),
    ("scenario: atlantis\ngrid: {months: [2]}\n", "bad value for 'scenario'"),
    ("scenario: commons\nbase: {months: 2}\ngrid: {months: 3}\n", "'grid'"),
    ("scenario: commons\nbase: {monthz: 2}\n", "monthz"),
])
def test_a_bad_sweep_file_is_one_error_and_starts_nothing(text, expected, tmp_path, monkeypatch):
    path = tmp_path / "runs.db"
    at = _app(f"sqlite:///{path}", monkeypatch, popen=Refuse)
    at.text_area(key="launch.sweep.text").set_value(text)
    _button(at, "Start sweep").click().run()
    assert not at.exception
    assert len(at.error) == 1 and expected in at.error[0].value, _errors(at)
    assert not _launches(at) and not path.exists()


# ----- a fork of the open run -----------------------------------------------------------------------------
def test_fork_the_open_run_at_a_tick_with_changed_fields(tmp_path, monkeypatch):
    """The run in ?run= forks at the chosen tick under the changed reward mode and horizon (`societas fork`); a negative
    tick, a tick past its last and a field that cannot change are one error each and start nothing."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    parent = execute(build_spec("commons", ticks=4, sets=["fishers=3"]), Store(url)).run_id
    at = _app(url, monkeypatch, run=parent)
    key = f"launch.fork.{parent}"
    for at_tick, expected in ((-1, "'--at'"), (9, "'--at'")):
        at.number_input(key=f"{key}.__at").set_value(at_tick)
        _button(at, "Start fork").click().run()
        assert not at.exception and len(at.error) == 1 and expected in at.error[0].value, _errors(at)
    assert not Recorder.calls and not _launches(at)
    at.number_input(key=f"{key}.__at").set_value(2)
    at.selectbox(key=f"{key}.reward_mode").set_value("cooperative")
    at.number_input(key=f"{key}.months").set_value(6)
    _button(at, "Start fork").click().run()
    assert not at.exception and not _errors(at), _errors(at)
    (cmd,) = Recorder.calls
    assert cmd[3:7] == ["fork", parent, "--at", "2"]
    assert "reward_mode=cooperative" in cmd and "months=6" in cmd
    runs = queries.list_runs(queries.open_reader(url)).set_index("run_id")
    (child,) = [r for r in runs.index if r != parent]
    assert runs.at[child, "parent_id"] == parent and runs.at[child, "branch_tick"] == 2
    assert runs.at[child, "ticks"] == 6 and runs.at[child, "reward_mode"] == "cooperative"
    at.run()
    assert any(label == f"Open run {child}" and q == f"run={child}" for _, label, q in _links(at)), _links(at)


def test_fork_says_when_no_run_is_open(tmp_path, monkeypatch):
    at = _app(f"sqlite:///{tmp_path / 'runs.db'}", monkeypatch, popen=Refuse)
    assert not at.exception and any("Open a run" in i.value for i in at.info)
    assert not [b for b in at.button if b.label == "Start fork"]


# ----- LLM options on the form ------------------------------------------------------------------------
def _fake_model(folder: Path) -> Path:
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"\0" * 16)
    return folder


def test_llm_options_of_the_run_command_are_passed_to_the_launched_run(tmp_path, monkeypatch):
    """Policy llm shows the run command's LLM options; --model and `--set llm.temperature=...` go on the command line,
    and the launched command rebuilds the very spec the page validated."""
    at = _app(f"sqlite:///{tmp_path / 'runs.db'}", monkeypatch, popen=Recorder)
    assert not [w for w in at.text_input if w.key == "launch.commons.__llm.model"]  # scripted: no LLM options
    at.selectbox(key="launch.commons.__policy").set_value("llm").run()
    model = _fake_model(tmp_path / "tiny-model")
    at.text_input(key="launch.commons.__llm.model").set_value(str(model))
    at.number_input(key="launch.commons.__llm.temperature").set_value(0.2)
    at.number_input(key="launch.commons.months").set_value(2)
    at.button[0].click().run()
    assert not at.exception and not _errors(at), _errors(at)
    (cmd,) = Recorder.calls
    assert cmd[cmd.index("--model") + 1] == str(model) and cmd[cmd.index("--set") + 1] == "llm.temperature=0.2"
    (item,) = _launches(at)
    assert item.spec.policy == "llm" and item.spec.llm.model == str(model) and item.spec.llm.temperature == 0.2
    from sim.runner.config import llm_overrides

    again = build_spec("commons", config_file=cmd[cmd.index("--config") + 1], sets=["llm.temperature=0.2"],
                       llm=llm_overrides(str(model), None, []))
    assert again.digest() == item.digest


@pytest.mark.parametrize("settings, expected", [
    ({"provider": "langchain"}, "needs a chat model class"),
    ({"cls": "langchain_openai:ChatOpenAI"}, "are for provider langchain"),
    ({"model": "/no/such/model"}, "'--model'"),
])
def test_bad_llm_options_are_one_error_and_start_nothing(settings, expected, tmp_path, monkeypatch):
    path = tmp_path / "runs.db"
    at = _app(f"sqlite:///{path}", monkeypatch, popen=Refuse)
    at.selectbox(key="launch.commons.__policy").set_value("llm").run()
    for name, value in settings.items():
        widget = at.selectbox if name == "provider" else at.text_input
        widget(key=f"launch.commons.__llm.{name}").set_value(value)
    at.button[0].click().run()
    assert not at.exception and len(at.error) == 1 and expected in at.error[0].value, _errors(at)
    assert not _launches(at) and not path.exists()


# ----- the Runs list ------------------------------------------------------------------------------------
def test_runs_list_shows_the_config_that_differs_searches_it_and_keeps_filters_in_the_url(tmp_path, monkeypatch):
    """Config fields that differ among the listed runs are columns (`config.strategy`), those equal are not; the search
    matches config values; the filters are in the URL, and a link with them opens the same list."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = Store(url)
    greedy = execute(build_spec("commons", ticks=2, sets=["fishers=3", "strategy=greedy"]), store).run_id
    calm = execute(build_spec("commons", ticks=2, seed=1, sets=["fishers=3"]), store).run_id
    donor = execute(build_spec("donor", ticks=2), store).run_id
    at = _app(url, monkeypatch, page="runs")
    shown = at.dataframe[0].value
    assert {"policy", "backend", "config.strategy"} <= set(shown.columns)
    at.multiselect(key="runs.scenario").set_value(["commons"]).run()
    shown = at.dataframe[0].value
    assert set(shown["run_id"]) == {greedy, calm} and "config.strategy" in shown and "config.fishers" not in shown
    assert dict(zip(shown["run_id"], shown["config.strategy"], strict=True)) == {greedy: "greedy", calm: "sustainable"}
    at.text_input(key="runs.q").set_value("strategy=greedy").run()
    assert list(at.dataframe[0].value["run_id"]) == [greedy]
    assert (at.query_params["scenario"], at.query_params["q"]) == ("commons", "strategy=greedy")
    copied = _app(url, monkeypatch, page="runs", scenario="commons,donor", q="sustainable")
    assert not copied.exception and list(copied.dataframe[0].value["run_id"]) == [calm]
    assert copied.multiselect(key="runs.scenario").value == ["commons", "donor"]
    assert copied.text_input(key="runs.q").value == "sustainable"
    assert donor not in set(copied.dataframe[0].value["run_id"])


def test_varying_config_keeps_only_keys_that_differ():
    cols = configs.varying_config([{"a": 1, "b": {"c": [1, 2]}, "d": "x" * 80}, {"a": 1, "b": {"c": [1]}, "d": "y"},
                                    {"a": 1, "b": {"c": [1]}}])
    assert list(cols.columns) == ["config.b.c", "config.d"]
    assert cols["config.b.c"].tolist() == ["[1,2]", "[1]", "[1]"]
    assert cols["config.d"].tolist()[1:] == ["y", ""] and len(cols["config.d"][0]) == 40


# ----- real background processes -------------------------------------------------------------------------
@pytest.mark.slow
def test_a_pasted_config_and_a_fork_run_in_real_background_processes(tmp_path, monkeypatch):
    """The page starts `python -m sim.cli run` from a pasted config, then forks that run, in real processes."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    monkeypatch.setenv("SOCIETAS_DB", url)
    monkeypatch.setattr(sys, "argv", ["app.py", "--allow-write"])
    monkeypatch.setattr(launcher.tempfile, "tempdir", str(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.switch_page("app_pages/launch.py").run()
    at.text_area(key="launch.config.text").set_value("fishers: 3\nmonths: 3\nseed: 4\n")
    _button(at, "Start run from YAML").click().run()
    assert not at.exception and not _errors(at), _errors(at)

    def wait_for(done) -> None:
        deadline = time.time() + 90
        while time.time() < deadline:
            at.run()
            if done():
                return
            time.sleep(0.5)
        raise AssertionError((_progress(at), _errors(at)))

    wait_for(lambda: any("finished, 3/3 ticks" in t for t in _progress(at)))
    run_id = _launches(at)[0].run_id
    assert any(label == f"Open run {run_id}" for _, label, _ in _links(at))
    at.query_params["run"] = run_id
    at.run()
    at.number_input(key=f"launch.fork.{run_id}.__at").set_value(1)
    at.selectbox(key=f"launch.fork.{run_id}.reward_mode").set_value("integrated")
    _button(at, "Start fork").click().run()
    assert not at.exception and not _errors(at), _errors(at)
    wait_for(lambda: sum("finished, 3/3 ticks" in t for t in _progress(at)) == 2)
    child = _launches(at)[1].run_id
    assert queries.get_run(queries.open_reader(url), child)["parent_id"] == run_id
