"""The served app in a real headless Chromium shows what the run had: the follow graph's edges are the run's own,
a donor run lists every player it ever had, a run ended without a reason shows none, an LLM group and a scripted
group are compared apart, and every page of the screenshots script draws (tests/screenshots.py)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from runner.config import build_spec
from runner.execution import execute
from sim.store.store import Store
from tests import browser

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not browser.available(), reason="chromium and chromium-driver are not "
                                                   "installed (apt-get install chromium chromium-driver; .ci/run installs them)")]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A store with a 150-member community, a donor run over three generations, scripted and LLM fishery groups."""
    pytest.importorskip("selenium")
    path = tmp_path_factory.mktemp("browser") / "runs.db"
    store = Store(f"sqlite:///{path}")
    ids = {"social": execute(build_spec("social", seed=5, sets=("agents=150", "ticks=3")), store).run_id,
           "donor": execute(build_spec("donor", seed=2, sets=("agents=6", "generations=3", "rounds=2")), store).run_id}
    ids["scripted"] = [execute(build_spec("commons", seed=s, ticks=3, sets=("fishers=3",)), store).run_id for s in range(2)]
    # an LLM group: the same config under policy llm; its rows are the scripted runs' with the spec of an LLM run
    # (what the Compare page groups by), so the test needs no model
    llm_spec = build_spec("commons", seed=9, ticks=3, sets=("fishers=3",), policy="llm")
    ids["llm"] = execute(build_spec("commons", seed=9, ticks=3, sets=("fishers=3",)), store).run_id
    con = sqlite3.connect(path)
    con.execute("UPDATE runs SET policy = 'llm', spec = ? WHERE id = ?", (llm_spec.model_dump_json(), ids["llm"]))
    con.commit()
    con.close()
    url = f"sqlite:///{path}"
    with browser.served_app(url, path.parent / "streamlit.log") as base, browser.chrome() as driver:
        yield {"base": base, "driver": driver, "store": store, "ids": ids}


def test_network_page_edges_equal_the_runs_final_metric(served):
    run_id = served["ids"]["social"]
    final = served["store"].get_run(run_id).final_metrics
    text = browser.open_page(served["driver"], f"{served['base']}/network?run={run_id}", "Network of run")
    shown = browser.metrics(served["driver"])
    assert int(shown["edges"]) == int(final["follow_edges"]), text[:500]
    assert float(shown["reciprocity"]) == pytest.approx(final["reciprocity"], abs=5e-3)
    assert "Traceback" not in text


def test_a_donor_run_lists_every_agent_it_had(served):
    run_id = served["ids"]["donor"]
    distinct = {s.agent_id for s in served["store"].steps(run_id)}
    text = browser.open_page(served["driver"], f"{served['base']}/agents?run={run_id}", "Agents of run")
    found = re.search(r"(\d+) agents took part", text)
    assert found and int(found.group(1)) == len(distinct) > 6


def test_run_page_says_nothing_of_a_missing_reason(served):
    run_id = served["ids"]["scripted"][0]
    text = browser.open_page(served["driver"], f"{served['base']}/run?run={run_id}", f"Run {run_id}")
    assert "ended: nan" not in text and "nan" not in text.split()


def test_compare_keeps_an_llm_group_apart_from_scripted_runs(served):
    runs = ",".join([*served["ids"]["scripted"], served["ids"]["llm"]])
    text = browser.open_page(served["driver"], f"{served['base']}/compare?runs={runs}", "Compare")
    found = re.search(r"(\d+) of \d+ ended runs.*? in (\d+) group", text)
    assert found and (int(found.group(1)), int(found.group(2))) == (3, 2), text[:800]


def test_screenshots_script_shoots_every_page(served, tmp_path):
    """tests/screenshots.py against the served store's file: one picture per page entry, each a real PNG."""
    import tests.screenshots as shots

    url = served["store"].url
    made = shots.shoot(url, tmp_path)
    assert len(made) == len(shots.PAGES)
    for name, _ in made:
        data = (tmp_path / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 20_000, name
    assert "did not finish" not in Path(tmp_path / "index.md").read_text()


def test_a_served_app_only_reads_unless_started_to_write(served, tmp_path):
    """In a real browser, the app served with no flag shows no delete and no launch form (it says why); served with
    --allow-write, both are there."""
    url = f"sqlite:///{served['store'].engine.url.database}"
    for flags, writes in (((), False), (("--allow-write",), True)):
        with browser.served_app(url, tmp_path / f"streamlit{len(flags)}.log", flags=flags) as base:
            runs = browser.open_page(served["driver"], f"{base}/runs", "Runs", charts=False)
            launch = browser.open_page(served["driver"], f"{base}/launch", "Launch a run", charts=False)
        assert ("Delete runs" in runs) is writes and ("--allow-write" in runs) is not writes, runs[-400:]
        assert ("Start run" in launch) is writes and ("only reads" in launch) is not writes, launch[:600]
