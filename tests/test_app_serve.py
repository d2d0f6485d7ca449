"""The app's launcher (`python -m app_pages.serve`, what `societas app` runs): it imports what the pages import before
the server listens, so a visitor's first page view imports nothing heavy, and it says where the app listens only
once that is done."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")

from runner.config import build_spec  # noqa: E402
from runner.execution import execute  # noqa: E402
from sim.store.store import Store  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
#: the project's packages: a first page view imports none of their modules
PROJECT = ("app_pages", "analysis", "scenarios", "sim", "agents", "runner", "societas")
#: the libraries the pages use: a first page view loads none of them (a small lazy module of one already loaded,
#: such as an image format of Pillow's, is no matter)
HEAVY = ("mesa", "scipy", "altair", "pandas", "sqlalchemy", "sqlmodel", "numpy", "networkx", "PIL", "jsonschema",
         "pyarrow", "lifelines", "vl_convert", "yaml", "pydantic")


def test_after_warming_no_page_imports_anything_heavy(tmp_path):
    """In a fresh process, `serve.warm()` and then every page of the app on a fishery and a Cleanup game: the first
    view of each page imports no project module and none of Mesa, SciPy, Altair, pandas, SQLAlchemy... (before: the
    first visit imported them, 2-3 s of a first render on 2 cores)."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = Store(url)
    fishery = execute(build_spec("commons", ticks=3, sets=("fishers=3", "sanctions=true")), store).run_id
    cleanup = execute(build_spec("cleanup", ticks=4, sets=("map=small", "agents=2", "episode_steps=10")), store).run_id
    script = textwrap.dedent(f"""
        import sys
        sys.argv = ["app.py"]
        from app_pages import serve
        serve.warm()
        from streamlit.testing.v1 import AppTest
        project, heavy = {PROJECT!r}, {HEAVY!r}
        at = AppTest.from_file({str(ROOT / "app.py")!r}, default_timeout=120)
        before = set(sys.modules)
        loaded = {{m.split(".")[0] for m in before}}
        at.run()
        pages = [(p, {fishery!r}) for p in ("runs", "run", "agents", "network", "norms", "conversations", "events",
                                            "replay", "policies", "compare", "launch")] + [("replay", {cleanup!r})]
        for page, run in pages:
            at.query_params["run"] = run
            at.switch_page(f"app_pages/{{page}}.py").run()
            assert not at.exception, (page, [e.value for e in at.exception])
        new = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in project
                     or (m.split(".")[0] in heavy and m.split(".")[0] not in loaded))
        print("NEW", new)
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SOCIETAS_DB": url}
    got = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    assert "NEW []" in got.stdout, got.stdout[-3000:]


def test_the_pages_imports_are_read_from_the_router_and_its_pages():
    """`page_imports` reads app.py and every page the router lists: Altair (the charts), Mesa's scenario classes are
    loaded beside them, and a page's `from package import module` names the module."""
    from app_pages import serve
    from app_pages.common import PAGES

    found = serve.page_imports()
    modules = {m for m, _ in found}
    assert {"app_pages.common", "streamlit", "pandas"} <= modules
    assert ("app_pages", ("charts", "export", "tables")) in found  # the Agents page's
    assert len(PAGES) == 11 and all((ROOT / file).exists() for _, file, _, _ in PAGES)


def test_the_launcher_says_where_it_listens_once_warm(tmp_path):
    """`python -m app_pages.serve --say TEXT`: TEXT comes after the warming and before Streamlit's own URL line; a bad
    Streamlit option is Streamlit's one-line usage error, exit 2."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "-m", "app_pages.serve", "--say", "HERE IT IS", "--server.port", str(port),
                                   "--server.headless", "true", "--", "--db", f"sqlite:///{tmp_path / 'runs.db'}"],
                                  cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            deadline = time.time() + 120
            while "URL:" not in log.read_text() and time.time() < deadline and server.poll() is None:
                time.sleep(0.5)
            text = log.read_text()
            assert "HERE IT IS" in text and "URL:" in text and text.index("HERE IT IS") < text.index("URL:"), text
            assert "No runtime found" not in text and "Traceback" not in text, text
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=20)
    bad = subprocess.run([sys.executable, "-m", "app_pages.serve", "--server.port", "notaport"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert bad.returncode == 2 and "Traceback" not in bad.stderr, bad.stderr[-2000:]
