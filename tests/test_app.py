"""The Streamlit app: every page renders for every registered scenario, on an empty, missing and
corrupt store; the launch form starts a run; delete asks first; a real browser shows a run."""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from scenarios import REGISTRY  # noqa: E402
from runner.config import build_spec  # noqa: E402
from runner.execution import RunFailed, execute  # noqa: E402
from sim.store.store import Store  # noqa: E402
from tests import browser  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
PAGES = ["runs", "run", "agents", "network", "norms", "conversations", "events", "replay", "policies", "compare", "launch"]
TABS = {"run": ["Trajectories", "Agents", "Final metrics", "Config", "Download"],
        "compare": ["Reward modes", "Survival", "Forks"]}
RICH_COMMONS = ["fishers=6", "talk=true", "sanctions=true", "social_learning=true",
                "population=[{count: 2, strategy: greedy}, {count: 4, strategy: sustainable}]"]


def _walk(node, out: dict | None = None) -> dict:
    """Count the rendered elements of each type under a node."""
    out = {} if out is None else out
    kind = getattr(node, "type", type(node).__name__)
    out[kind] = out.get(kind, 0) + 1
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            _walk(child, out)
    return out


def _run(store: Store, scenario: str, ticks: int, seed: int = 0, sets: tuple[str, ...] = ()) -> str:
    try:
        return execute(build_spec(scenario, ticks=ticks, seed=seed, sets=sets), store).run_id
    except RunFailed as exc:  # a run that fails is still a stored run the app must show
        return exc.run_id


@pytest.fixture(scope="module")
def filled(tmp_path_factory) -> dict:
    """A store with two runs (two seeds, two reward modes) of every registered scenario, and a rich commons run."""
    url = f"sqlite:///{tmp_path_factory.mktemp('app') / 'runs.db'}"
    store = Store(url)
    ids = {}
    for name in sorted(REGISTRY):
        ids[name] = _run(store, name, 2)
        _run(store, name, 2, seed=1, sets=("reward_mode=cooperative",))
    code = tmp_path_factory.mktemp("code") / "greedy.py"
    code.write_text("def policy(obs):\n    return greedy_action(obs)\n")
    ids["synthesis"] = execute(build_spec("gathering", ticks=4, policy="synthesis", sets=(
        "map=small", "agents=2", "episode_steps=4", f"seed_code={code}")), store).run_id
    ids["rich"] = _run(store, "commons", 6, seed=2, sets=tuple(RICH_COMMONS))  # (the newest: Compare opens on it)
    return {"url": url, "ids": ids, "store": store}


def _app(url: str, monkeypatch, *flags: str) -> AppTest:
    """The app on `url`, started with `flags` (`--allow-write`: launching and deleting; by default it only reads)."""
    monkeypatch.setenv("SOCIETAS_DB", url)
    monkeypatch.setattr(sys, "argv", ["app.py", *flags])
    return AppTest.from_file(APP, default_timeout=60).run()


def _page(at: AppTest, page: str, run_id: str | None = None) -> dict:
    if run_id:
        at.query_params["run"] = run_id
    at.switch_page(f"app_pages/{page}.py").run()
    return _walk(at.main)


@pytest.mark.parametrize("scenario", sorted(REGISTRY))
def test_every_page_renders_a_run_of_every_scenario(scenario, filled, monkeypatch):
    """Each page shows the scenario's run with no exception and no error message; the run page draws charts."""
    at = _app(filled["url"], monkeypatch)
    run_id = filled["ids"][scenario]
    for page in PAGES:
        seen = _page(at, page, run_id)
        assert not at.exception, (page, [e.value for e in at.exception])
        assert not at.error, (page, [e.value for e in at.error])
        if page == "run":
            assert seen.get("vega_lite_chart", 0) >= 2
            assert at.title[0].value == f"Run {run_id}"
        for name in TABS.get(page, ()):  # tabs run lazily: open each one
            at.session_state[f"{page}_tab"] = name
            at.run()
            assert not at.exception and not at.error, (page, name, [e.value for e in (*at.exception, *at.error)])
        if page == "runs":
            shown = at.dataframe[0].value
            assert run_id in set(shown["run_id"])


def test_every_page_renders_a_validity_probe(tmp_path, monkeypatch):
    """A probe run (origin `probe`: one tick per probe, decisions as agent steps) is listed and every page shows it."""
    from runner.probing import run_probes

    url = f"sqlite:///{tmp_path / 'runs.db'}"
    report = run_probes(build_spec("commons", policy="scripted"), Store(url), seeds=10)
    at = _app(url, monkeypatch)
    for page in PAGES:
        _page(at, page, report.run_id)
        assert not at.exception and not at.error, (page, [e.value for e in (*at.exception, *at.error)])
        if page == "runs":
            assert report.run_id in set(at.dataframe[0].value["run_id"])


@pytest.mark.parametrize("kind", ["missing", "empty", "corrupt"])
def test_every_page_is_friendly_without_usable_runs(kind, tmp_path, monkeypatch):
    """Missing, empty and corrupt stores give a message on every page, no exception; reading creates no file."""
    path = tmp_path / "runs.db"
    if kind == "empty":
        Store(f"sqlite:///{path}")
    elif kind == "corrupt":
        path.write_text("this is not a database")
    at = _app(f"sqlite:///{path}", monkeypatch)
    for page in PAGES:
        _page(at, page)
        assert not at.exception, (page, [e.value for e in at.exception])
        if page != "launch":
            messages = [m.value for m in (*at.info, *at.error)]
            assert messages, page
            if kind == "corrupt":
                assert any("cannot be read" in m for m in messages)
    assert path.exists() == (kind != "missing")


def test_an_unknown_run_in_the_url_falls_back_to_the_newest(filled, monkeypatch):
    """`?run=nope` is a warning and the newest run is shown, not an error."""
    at = _app(filled["url"], monkeypatch)
    _page(at, "run", "nope")
    assert not at.exception and not at.error
    assert any("No run 'nope'" in w.value for w in at.sidebar.warning)
    assert at.title[0].value.startswith("Run ")


def test_a_run_with_no_tick_yet_renders_everywhere(tmp_path, monkeypatch):
    """A run that has just started (status running, no tick committed) is a message on each page, not an error."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = Store(url)
    rid = store.create_run(build_spec("commons"), {})
    at = _app(url, monkeypatch)
    for page in PAGES:
        _page(at, page, rid)
        assert not at.exception and not at.error, (page, [e.value for e in (*at.exception, *at.error)])
    _page(at, "run", rid)
    assert any("Still running" in i.value for i in at.info)


def test_network_page_draws_interactions_with_metrics(filled, monkeypatch):
    """Sanctions and imitation between fishers become a drawn graph with its metrics beside it."""
    at = _app(filled["url"], monkeypatch)
    seen = _page(at, "network", filled["ids"]["rich"])
    assert not at.exception and not at.error
    assert seen.get("vega_lite_chart", 0) >= 1  # the graph; its degree distribution in its place on demand:
    at.session_state["network_view"] = "Degree distribution"
    at.run()
    assert not at.exception and not at.error
    assert _walk(at.main).get("vega_lite_chart", 0) >= 1
    assert any("Degree distribution" in el.proto.spec for el in at.get("vega_lite_chart"))
    labels = {m.label: m.value for m in at.metric}
    assert int(labels["nodes"]) >= 2 and int(labels["edges"]) >= 1


def test_conversations_and_norms_show_what_fishers_said_and_did(filled, monkeypatch):
    """Talk messages appear as a thread with their speaker; norms list statements and sanctions."""
    at = _app(filled["url"], monkeypatch)
    _page(at, "conversations", filled["ids"]["rich"])
    assert not at.exception and not at.error
    text = " ".join(m.value for m in at.markdown)
    assert "agent " in text and "→ everyone" in text
    _page(at, "norms", filled["ids"]["rich"])
    assert not at.exception and not at.error
    counts = {m.label: m.value for m in at.metric}
    assert int(counts["statements"]) > 0 and int(counts["sanctions"]) > 0


def test_policies_show_each_synthesised_version_and_its_scores(filled, monkeypatch):
    """A synthesis run's program is listed with its status, code and episode scores; other runs say they have none."""
    at = _app(filled["url"], monkeypatch)
    _page(at, "policies", filled["ids"]["synthesis"])
    assert not at.exception and not at.error
    counts = {m.label: m.value for m in at.metric}
    assert int(counts["Versions written"]) == 1 and int(counts["Accepted"]) == 1
    assert any("greedy_action(obs)" in c.value for c in at.code)
    _page(at, "policies", filled["ids"]["commons"])
    assert not at.exception and any("no synthesised policy" in i.value for i in at.info)


def test_compare_pools_seeds_and_shows_survival(filled, monkeypatch):
    """Compare over a scenario's runs shows CI charts, the reward-mode ablation and the survival table."""
    at = _app(filled["url"], monkeypatch)
    _page(at, "compare")
    assert not at.exception and not at.error
    drawn = set()  # one CI chart at a time, the one the "Chart" control names: each chosen metric's in turn
    for metric in at.session_state["compare_metrics"]:
        at.session_state["compare_drawn_metric"] = metric
        at.run()
        (chart,) = at.get("vega_lite_chart")
        if f"{metric}: each run" in chart.proto.spec:
            drawn.add(metric)
    assert len(drawn) >= 3
    at.session_state["compare_tab"] = "Reward modes"
    at.run()
    assert not at.info and _walk(at.main).get("vega_lite_chart", 0) >= 3  # private vs cooperative side by side
    at.session_state["compare_tab"] = "Survival"
    at.run()
    survival = at.dataframe[0].value
    assert set(survival.columns) >= {"share_collapsed", "mean_survival_time"} and survival["runs"].sum() >= 2


@pytest.mark.slow
def test_launch_form_starts_a_run_that_appears_in_the_list(tmp_path, monkeypatch):
    """Submitting the form runs the scenario in the background; the new run shows up in the Runs page."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    at = _app(url, monkeypatch, "--allow-write")
    at.switch_page("app_pages/launch.py").run()
    at.number_input(key="launch.commons.months").set_value(2)
    at.number_input(key="launch.commons.__seed").set_value(7)
    at.button[0].click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    from sim.store import queries

    deadline = time.time() + 60
    done = None
    while time.time() < deadline and done is None:  # read-only polling: the run's process creates the store
        eng = queries.open_reader(url)
        if eng is not None and queries.has_schema(eng):
            table = queries.list_runs(eng)
            finished = table[table["status"] != "running"]
            done = finished.iloc[0] if len(finished) else None
        time.sleep(0.3)
    assert done is not None and done["seed"] == 7 and done["ticks"] == 2 and done["status"] == "finished"
    at.run()
    assert any("2/2 ticks" in p.proto.text for p in at.get("progress"))
    at.switch_page("app_pages/runs.py").run()
    assert done["run_id"] in set(at.dataframe[0].value["run_id"])


def test_launch_form_names_a_bad_field_and_starts_nothing(tmp_path, monkeypatch):
    """A config the scenario refuses is one error line naming the field; no process, no store file."""
    path = tmp_path / "runs.db"
    at = _app(f"sqlite:///{path}", monkeypatch, "--allow-write")
    at.switch_page("app_pages/launch.py").run()
    at.text_input(key="launch.commons.population").set_value("[{count: 2}]")
    at.button[0].click().run()
    assert not at.exception
    assert any("population" in e.value for e in at.error), [e.value for e in at.error]
    assert "launches" not in at.session_state or not at.session_state["launches"]
    assert not path.exists()


def test_delete_asks_for_confirmation_then_deletes(tmp_path, monkeypatch):
    """Delete… only asks; Yes removes the run from the store; Cancel would keep it."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = Store(url)
    doomed, kept = _run(store, "commons", 2), _run(store, "commons", 2, seed=1)
    at = _app(url, monkeypatch, "--allow-write")
    at.multiselect(key="doomed").set_value([doomed]).run()
    next(b for b in at.button if b.label == "Delete…").click().run()
    assert {r.id for r in store.list_runs()} == {doomed, kept}
    assert any("cannot be undone" in w.value for w in at.warning)
    next(b for b in at.button if b.label.startswith("Yes, delete")).click().run()
    assert not at.exception
    assert [r.id for r in store.list_runs()] == [kept]
    assert set(at.dataframe[0].value["run_id"]) == {kept}


# ----- a real browser ---------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not browser.available(), reason="chromium and chromium-driver are not installed "
                    "(apt-get install chromium chromium-driver; .ci/run installs them)")
def test_browser_shows_a_run_chart_and_its_network(filled, tmp_path):
    """Headless Chromium opens the served app, goes to a run and to its network: charts render; a screenshot is saved."""
    pytest.importorskip("selenium.webdriver")
    run_id = filled["ids"]["rich"]
    with browser.served_app(filled["url"], tmp_path / "streamlit.log") as base, browser.chrome() as driver:
        browser.open_page(driver, f"{base}/run?run={run_id}", f"Run {run_id}")
        driver.save_screenshot(str(tmp_path / "run.png"))
        body = browser.open_page(driver, f"{base}/network?run={run_id}", "Network of run")
        assert "reciprocity" in body and "Network metrics" in body and "Traceback" not in body
        shot = tmp_path / "network.png"
        driver.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        keep = os.environ.get("SOCIETAS_SCREENSHOTS")
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            for name in ("run.png", "network.png"):
                shutil.copy(tmp_path / name, Path(keep) / name)
