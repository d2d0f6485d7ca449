"""The app's doors: it listens on 127.0.0.1 unless told otherwise, only reads unless started with --allow-write, and
imports only the code references its store's runs used unless started with --allow-code.

Pages run in Streamlit's AppTest with the command line the app would get after `--` (`sys.argv`); the server
tests start `societas app` and `streamlit run app.py` for real and read the kernel's table of listening sockets.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Optional

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from runner import launcher  # noqa: E402
from conftest import cli_process  # noqa: E402
from runner.config import build_spec  # noqa: E402
from runner.execution import execute  # noqa: E402
from sim.store.store import Store  # noqa: E402
from test_user_scenarios import SCENARIO  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")


class Recorder:
    """Stands in for subprocess.Popen: records what the page would start, starts nothing."""

    calls: list[list[str]] = []

    def __init__(self, cmd: list[str], **kwargs: Any) -> None:
        self.args = cmd
        Recorder.calls.append(list(cmd))

    def poll(self) -> Optional[int]:
        return None


def _store(tmp_path: Path, name: str = "runs.db") -> tuple[str, Store, str]:
    url = f"sqlite:///{tmp_path / name}"
    store = Store(url)
    run = execute(build_spec("commons", ticks=2, seed=len(name)), store).run_id
    return url, store, run


def _app(url: str, monkeypatch, tmp_path: Path, *flags: str, page: str = "runs") -> AppTest:
    monkeypatch.setenv("SOCIETAS_DB", url)
    monkeypatch.setattr(sys, "argv", ["app.py", *flags])
    monkeypatch.setattr(launcher.subprocess, "Popen", Recorder)
    monkeypatch.setattr(launcher.tempfile, "tempdir", str(tmp_path))
    Recorder.calls = []
    at = AppTest.from_file(APP, default_timeout=60).run()
    if page != "runs":
        at.switch_page(f"app_pages/{page}.py").run()
    return at


def _labels(at: AppTest) -> list[str]:
    return [b.label for b in at.button]


def _user_scenario(tmp_path: Path, name: str) -> tuple[str, Path]:
    """A scenario file that leaves a marker when it is imported (so a test can tell whether it ran at all)."""
    marker = tmp_path / f"{name}.imported"
    path = tmp_path / f"{name}.py"
    path.write_text(SCENARIO.format(name=name) + f"\nimport pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n")
    return f"{path}:Auction", marker


# ----- read-only by default -----------------------------------------------------------------------------------
def test_a_default_app_cannot_delete_launch_fork_or_open_another_store(tmp_path, monkeypatch):
    """Started with no flag: the Runs page has no delete, the Launch page (form, YAML, sweep, fork) starts nothing
    and says how to allow it, and the sidebar's store cannot be changed, even by a session that sets it."""
    url, store, run = _store(tmp_path)
    other, _, other_run = _store(tmp_path, "other.db")
    at = _app(url, monkeypatch, tmp_path)
    assert not at.exception
    assert "Delete…" not in _labels(at) and not [m for m in at.multiselect if m.key == "doomed"]
    assert any("--allow-write" in c.value for c in at.caption)
    at.switch_page("app_pages/launch.py").run()
    assert not at.exception and not at.button and not at.text_area and not at.file_uploader
    assert any("only reads" in i.value and "--allow-write" in i.value for i in at.info)
    at.query_params["run"] = run
    at.run()
    assert not at.button  # (no fork form either)
    store_box = next(t for t in at.sidebar.text_input if t.label == "Store")
    assert store_box.disabled and store_box.value == url
    at.session_state["db_url"] = other  # what an edited box would send
    at.switch_page("app_pages/runs.py").run()
    shown = set(at.dataframe[0].value["run_id"])
    assert shown == {run} and other_run not in shown
    assert not Recorder.calls and [r.id for r in store.list_runs()] == [run]


def test_with_allow_write_it_deletes_launches_forks_and_opens_another_store(tmp_path, monkeypatch):
    """`--allow-write`: delete, the Launch page's form and fork start their commands, and the sidebar opens another
    store."""
    url, store, run = _store(tmp_path)
    other, _, other_run = _store(tmp_path, "other.db")
    at = _app(url, monkeypatch, tmp_path, "--allow-write", page="launch")
    at.number_input(key="launch.commons.months").set_value(2)
    next(b for b in at.button if b.label == "Start run").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    at.query_params["run"] = run
    at.run()
    next(b for b in at.button if b.label == "Start fork").click().run()
    assert [c[3] for c in Recorder.calls] == ["run", "fork"]
    at.switch_page("app_pages/runs.py").run()
    at.multiselect(key="doomed").set_value([run]).run()
    next(b for b in at.button if b.label == "Delete…").click().run()
    next(b for b in at.button if b.label.startswith("Yes, delete")).click().run()
    assert not at.exception and store.list_runs() == []
    at.sidebar.text_input(key="db_url").set_value(other).run()
    assert set(at.dataframe[0].value["run_id"]) == {other_run}


# ----- code references ----------------------------------------------------------------------------------------
def test_a_typed_reference_is_imported_only_when_the_store_used_it_or_with_allow_code(tmp_path, monkeypatch):
    """With --allow-write alone, a scenario, chat model class, template or strategy reference typed into the Launch
    page (form, YAML, sweep) is refused before it is imported, unless a run of the store used it; --allow-code
    lets the page import it."""
    url, store, _ = _store(tmp_path)
    typed, marker = _user_scenario(tmp_path, "typed")
    used, _ = _user_scenario(tmp_path, "used")
    used_run = execute(build_spec(used, ticks=2), store).run_id
    at = _app(url, monkeypatch, tmp_path, "--allow-write", page="launch")
    at.text_input(key="launch.__reference").set_value(typed).run()
    assert any("may not import" in e.value and "--allow-code" in e.value for e in at.error), [e.value for e in at.error]
    assert not marker.exists()
    at.text_input(key="launch.__reference").set_value(used).run()
    assert not at.error and at.selectbox[0].value == used
    assert used_run in {r.id for r in store.list_runs()}
    for text in (f"scenario: {typed}\nagents: 2\n",
                 "policy: llm\nllm: {provider: langchain, cls: 'fakechat:FakeChat'}\nfishers: 2\n",
                 f"llm: {{template: '{tmp_path / 'tpl.py'}:TEMPLATE'}}\nfishers: 2\n",
                 f"population: [{{count: 5, strategy: '{tmp_path / 'strat.py'}:greedy'}}]\n"):
        at.text_area(key="launch.config.text").set_value(text)
        next(b for b in at.button if b.label == "Start run from YAML").click().run()
        assert any("may not import" in e.value for e in at.error), (text, [e.value for e in at.error])
    at.text_area(key="launch.sweep.text").set_value(f"scenario: {typed}\nseeds: 1\n")
    next(b for b in at.button if b.label == "Start sweep").click().run()
    assert any("may not import" in e.value for e in at.error), [e.value for e in at.error]
    assert not marker.exists() and not Recorder.calls
    at = _app(url, monkeypatch, tmp_path, "--allow-write", "--allow-code", page="launch")
    at.text_input(key="launch.__reference").set_value(typed).run()
    assert not at.error and marker.exists()


def test_another_stores_code_is_not_imported_by_viewing_it(tmp_path, monkeypatch):
    """A store opened from the sidebar (--allow-write) whose runs name a scenario file: its pages show the runs but do
    not import the file unless the app was started with --allow-code."""
    url, _, _ = _store(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = f"sqlite:///{elsewhere / 'other.db'}"
    ref, marker = _user_scenario(elsewhere, "foreign")
    made = cli_process("run", ref, "--ticks", "2", "--json", db=other)  # (another process: this one never imported it)
    assert made.returncode == 0, made.stderr
    foreign = json.loads(made.stdout)["run_id"]
    marker.unlink()
    at = _app(url, monkeypatch, tmp_path, "--allow-write")
    at.sidebar.text_input(key="db_url").set_value(other).run()
    assert set(at.dataframe[0].value["run_id"]) == {foreign}
    for page in ("run", "agents", "compare"):
        at.query_params["run"] = foreign
        at.switch_page(f"app_pages/{page}.py").run()
        assert not at.exception, page
    assert not marker.exists()


# ----- the server --------------------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> set[str]:
    """The addresses with a socket listening on `port` (from /proc/net/tcp and tcp6)."""
    found = set()
    for table, size in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            local, state = line.split()[1], line.split()[3]
            address, _, hexport = local.partition(":")
            if state == "0A" and int(hexport, 16) == port:  # LISTEN
                raw = bytes.fromhex(address)
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.add(socket.inet_ntop(socket.AF_INET if size == 4 else socket.AF_INET6, raw))
    return found


def _serve(cmd: list[str], port: int, log: Path) -> tuple[subprocess.Popen, set[str], str]:
    out = open(log, "w")
    server = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.time() + 90
    while time.time() < deadline:
        try:
            if urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=2).status == 200:
                break
        except OSError:
            pass
        if server.poll() is not None:
            break
        time.sleep(0.5)
    return server, _listening(port), log.read_text()


def _stop(server: subprocess.Popen) -> None:
    os.killpg(server.pid, 15)
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, 9)


@pytest.mark.parametrize("how", ["societas app", "streamlit run app.py"])
def test_the_server_listens_on_127_0_0_1_by_default_and_says_so(tmp_path, how):
    """`societas app` (and a plain `streamlit run app.py`, through .streamlit/config.toml) listens on 127.0.0.1 only;
    `societas app` says so when it starts; `--address` chooses another."""
    port = _free_port()
    db = f"sqlite:///{tmp_path / 'runs.db'}"
    cmd = ([sys.executable, "-m", "societas.cli", "app", "--db", db, "--port", str(port)] if how == "societas app" else
           [sys.executable, "-m", "streamlit", "run", APP, "--server.port", str(port), "--", "--db", db])
    server, addresses, log = _serve(cmd, port, tmp_path / "server.log")
    try:
        assert addresses == {"127.0.0.1"}, (addresses, log[-2000:])
        if how == "societas app":
            assert "listening on 127.0.0.1 only" in log and "read-only" in log, log
    finally:
        _stop(server)
    if how == "societas app":
        port = _free_port()
        server, addresses, log = _serve([*cmd[:-1], str(port), "--address", "::1"], port, tmp_path / "other.log")
        try:
            assert addresses == {"::1"} and "listening on ::1" in log, (addresses, log[-2000:])
        finally:
            _stop(server)
