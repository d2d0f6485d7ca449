"""Every chart right and a figure you can put in a paper (issue 41): each numbered defect has its test here, read from
the charts' Vega-Lite specs and data as Streamlit sends them (tests/apptest.py), not from a picture; and the anchors'
viewers: GovSim's month opened from a chart, per-run lines and the share collapsed by month; AgentSociety's replay
timeline and the grid games' board; Concordia's memory timeline and two transcripts side by side; Sotopia's per-agent
reward vectors."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from analysis import compare as cmp  # noqa: E402
from analysis import memories, vectors  # noqa: E402
from sim.store import queries  # noqa: E402
from scenarios.grid import frames as grid_frames  # noqa: E402
from runner.config import build_spec  # noqa: E402
from runner.execution import RunFailed, execute  # noqa: E402
from runner.resume import fork_run  # noqa: E402
from sim.store.store import Store  # noqa: E402
from tests import apptest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
APP = str(ROOT / "app.py")
RICH = ("fishers=6", "talk=true", "sanctions=true", "social_learning=true",
        "population=[{count: 2, strategy: greedy}, {count: 4, strategy: sustainable}]")
CLEANUP = ("map=small", "agents=4", "episode_steps=40",
           "population=[{count: 2, strategy: cooperative}, {count: 2, strategy: exploitative}]")
#: the controls that choose what a page draws (a page module is not imported here: importing it renders it)
RUN_SECTION, SOCIAL = "run_metrics_section", "Social metrics (Perolat et al. 2017)"
NETWORK_VIEW, DEGREES = "network_view", "Degree distribution"
HASH_CHAT = {"provider": "langchain", "cls": "tests.fakechat:HashChat", "max_retries": 0}


def _run(store: Store, scenario: str, seed: int = 0, sets: tuple[str, ...] = (), ticks: int | None = None,
         **kw) -> str:
    try:
        return execute(build_spec(scenario, seed=seed, sets=sets, ticks=ticks, **kw), store).run_id
    except RunFailed as exc:
        return exc.run_id


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    """A talking fishery with sanctions and its fork without them; an LLM fishery that talks (a deterministic chat
    model: prompts, answers, memory); a donor game of 18 players; a Cleanup game with beams; a community; fisheries
    that collapse at different months, in 11 configurations and in two reward modes."""
    url = f"sqlite:///{tmp_path_factory.mktemp('figures') / 'runs.db'}"
    s = Store(url)
    ids: dict = {}
    ids["rich"] = _run(s, "commons", 7, RICH, 6)
    ids["fork"] = fork_run(s, ids["rich"], 1, ["sanctions=false"]).run_id
    ids["llm"] = _run(s, "commons", 3, ("fishers=3", "talk=true", "months=3"), policy="llm", llm=HASH_CHAT)
    ids["donor"] = _run(s, "donor", 1, ("agents=6", "generations=3", "rounds=2"))
    ids["cleanup"] = _run(s, "cleanup", 0, CLEANUP, 40)
    ids["social"] = _run(s, "social", 3, ("agents=60", "ticks=3"))
    ids["random"] = {r: [_run(s, "commons", seed, ("fishers=5", "months=8", f"regrowth={r}",
                                                     "population=[{count: 5, strategy: random}]")) for seed in range(4)]
                     for r in (1.3, 1.6)}
    ids["modes"] = {m: [_run(s, "commons", seed, ("fishers=3", "months=3", f"reward_mode={m}")) for seed in range(2)]
                    for m in ("private", "cooperative")}
    ids["many"] = [_run(s, "commons", 0, ("fishers=3", "months=3", f"capacity={100 + 10 * k}")) for k in range(11)]
    return {"url": url, "store": s, "ids": ids, "engine": queries.open_reader(url)}


def _app(url: str, monkeypatch, **params: str) -> AppTest:
    monkeypatch.setenv("SOCIETAS_DB", url)
    monkeypatch.setattr(sys, "argv", ["app.py"])
    at = AppTest.from_file(APP, default_timeout=120).run()
    for k, v in params.items():
        at.query_params[k] = v
    return at


def _open(at: AppTest, page: str, **params: str) -> AppTest:
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception and not at.error, (page, [e.value for e in (*at.exception, *at.error)])
    return at


def _tab(at: AppTest, key: str, name: str) -> AppTest:
    at.session_state[key] = name
    at.run()
    assert not at.exception and not at.error, (name, [e.value for e in (*at.exception, *at.error)])
    return at


def _layers(spec: dict) -> list[dict]:
    out = [spec]
    for key in ("layer", "hconcat", "vconcat"):
        for sub in spec.get(key, []) or []:
            out += _layers(sub)
    if isinstance(spec.get("spec"), dict):
        out += _layers(spec["spec"])
    return out


def _chart(at: AppTest, title: str) -> tuple[dict, dict[str, pd.DataFrame]]:
    """The chart whose title (its own or a layer's, with its subtitle) contains `title`."""
    for spec, data in apptest.charts(at):
        if any(title in json.dumps(layer.get("title", "")) for layer in _layers(spec)):
            return spec, data
    raise AssertionError(f"no chart titled {title!r}: {[s.get('title') for s, _ in apptest.charts(at)]}")


def _frame(data: dict[str, pd.DataFrame], *columns: str) -> pd.DataFrame:
    return next(f for f in data.values() if set(columns) <= set(f.columns))


def _problems(at: AppTest) -> list[str]:
    return [p for spec, data in apptest.charts(at) for p in apptest.chart_problems(spec, data)]


# ----- 1. every chart draws what its data holds ---------------------------------------------------------------------
def test_state_trajectories_read_their_dotted_columns(store, monkeypatch):
    """Run → Trajectories: `state.stock` is a column with a dot in its name; each chart's encodings name it escaped,
    so it is read (before: read as the nested `stock` of `state`, every state chart was blank)."""
    at = _tab(_open(_app(store["url"], monkeypatch), "run", run=store["ids"]["rich"]), "run_tab", "Trajectories")
    charts = apptest.charts(at)
    assert len(charts) >= 3 and not _problems(at), _problems(at)
    spec, data = next((s, d) for s, d in charts if any(layer.get("title") == "state.stock" for layer in _layers(s)))
    line = next(layer for layer in _layers(spec) if layer.get("encoding", {}).get("y", {}).get("field", "").startswith("state"))
    assert line["encoding"]["y"]["field"] == "state\\.stock"
    rows = _frame(data, "state.stock")
    assert rows["state.stock"].notna().sum() == 6


def test_every_chart_of_every_page_names_fields_its_data_has(store, monkeypatch):
    """On every page, tab and view (the Run page's Perolat section, the Network page's degree distribution) of each
    kind of run, no chart has an encoding naming a field its data lacks, nor a view without rows: nothing is drawn
    blank."""
    at = _app(store["url"], monkeypatch)
    views = {"run": [("run_tab", "Metrics"), (RUN_SECTION, SOCIAL), ("run_tab", "Trajectories"),
                     ("run_tab", "Agents")],
             "agents": [("agents_tab", "All agents"), ("agents_tab", "One agent")],
             "network": [(None, None), (NETWORK_VIEW, DEGREES)]}
    for key in ("rich", "llm", "donor", "cleanup", "social"):
        for page in ("run", "agents", "network", "norms", "replay", "events"):
            _open(at, page, run=store["ids"][key])
            for state, name in views.get(page, [(None, None)]):
                if state is not None:
                    _tab(at, state, name)
                assert not _problems(at), (key, page, name, _problems(at))


def test_a_figure_export_draws_the_line(store, monkeypatch):
    """The PNG export of a state chart has the line's colour in it (before: axes only)."""
    from PIL import Image

    from app_pages import charts, export

    ticks = queries.tick_frame(store["engine"], store["ids"]["rich"])
    png = export.png(charts.metric(ticks, "state.stock", unit="tons"), scale=1)
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3)
    line = np.all(np.abs(pixels.astype(int) - [76, 120, 168]) < 40, axis=1)  # the line's blue
    assert line.sum() > 200


# ----- 2. two groups, two rows ----------------------------------------------------------------------------------------
def test_two_groups_across_seeds_get_a_row_each(store, monkeypatch):
    """Compare across seeds with 2 groups: the chart's height is its plot's (autosize fit-x or pad, not Streamlit's
    `fit`, which squeezed 2 rows into the space left after the title and the axis) and each group has room."""
    runs = ",".join(store["ids"]["modes"]["private"] + store["ids"]["modes"]["cooperative"])
    at = _open(_app(store["url"], monkeypatch), "compare", runs=runs, by="reward_mode")
    charts = apptest.charts(at)
    assert charts
    for spec, data in charts:
        assert spec["autosize"]["type"] in ("fit-x", "pad"), spec.get("autosize")
        y = next(layer["encoding"]["y"] for layer in _layers(spec) if "y" in layer.get("encoding", {}))
        rows = _frame(data, "run_id", "value")[y["field"]].nunique()
        assert rows == 2 and spec["height"] / rows >= 24


# ----- 3. forks of the chosen runs ------------------------------------------------------------------------------------
def test_forks_tab_shows_the_forks_of_the_chosen_runs(store, monkeypatch, tmp_path):
    """Compare → Forks draws the parent of the chosen fork, not the alphabetically first parent in the store: of two
    parents with a fork each, the fork of the one that sorts last is chosen."""
    other = _run(store["store"], "commons", 11, ("fishers=3", "months=4"))
    families = {store["ids"]["rich"]: store["ids"]["fork"], other: fork_run(store["store"], other, 2, ["reward_mode=cooperative"]).run_id}
    parent = max(families)
    at = _tab(_open(_app(store["url"], monkeypatch), "compare", runs=families[parent]), "compare_tab", "Forks")
    spec, data = _chart(at, "parent and forks")
    drawn = set(_frame(data, "run")["run"])
    assert drawn == {f"parent {parent}", f"fork {families[parent]}"}


def test_a_link_to_a_fork_made_a_moment_ago_opens_its_family(tmp_path, monkeypatch):
    """A link to Compare's Forks tab for a fork made a moment ago, followed after Compare was open on other runs, draws
    that fork and its parent: the runs table (cached two seconds) is read afresh for a run it lacks, and the link's
    runs and tab win over the session's earlier choice (before: the link's runs were dropped, the page stayed on the
    other scenario's runs, with no forks)."""
    url = f"sqlite:///{tmp_path / 'moment.db'}"
    s = Store(url)
    _run(s, "cleanup", 0, CLEANUP, 4)
    at = _open(_app(url, monkeypatch), "compare")
    common = pytest.importorskip("app_pages.common")
    assert set(common._runs(url)["scenario"]) == {"cleanup"}  # the table as cached now
    parent = _run(s, "commons", 0, ("fishers=3", "months=4"))
    fork = fork_run(s, parent, 2, ["reward_mode=cooperative"]).run_id
    at = _open(at, "compare", runs=fork, tab="Forks")
    _, data = _chart(at, "parent and forks")
    assert set(_frame(data, "run")["run"]) == {f"parent {parent}", f"fork {fork}"}
    assert not at.warning


# ----- 4. over time and survival ----------------------------------------------------------------------------------------
def test_over_time_counts_a_collapsed_run_as_zero_after_its_collapse():
    """GovSim's convention: a collapsed run is 0 after its collapse up to its horizon, so the mean cannot rise when it
    drops out; without the convention only the runs still going are averaged (and the mean rises)."""
    frames = {"a": pd.DataFrame({"tick": [1, 2, 3, 4], "stock": [80.0, 70.0, 60.0, 50.0]}),
              "b": pd.DataFrame({"tick": [1, 2], "stock": [40.0, 2.0]})}
    groups = {"a": "g", "b": "g"}
    zero = cmp.over_time(frames, groups, "stock", {"b": (2.0, 4.0)}).set_index("tick")
    assert zero.loc[3, "mean"] == 30.0 and zero.loc[4, "mean"] == 25.0 and zero.loc[4, "runs"] == 2
    assert zero.loc[4, "after_collapse"] == 1 and zero.loc[2, "after_collapse"] == 0
    alive = cmp.over_time(frames, groups, "stock").set_index("tick")
    assert alive.loc[3, "mean"] == 60.0 > alive.loc[2, "mean"]
    each = cmp.run_series(frames, groups, "stock", {"b": (2.0, 4.0)})
    assert each[each["run_id"] == "b"]["tick"].tolist() == [1, 2, 3, 4]


def test_over_time_page_says_its_convention_and_draws_each_run(store, monkeypatch):
    """Over time (GovSim's figure): each run's line beside its group's mean, zeros after a collapse marked, and the
    caption says the convention."""
    runs = ",".join(store["ids"]["random"][1.3] + store["ids"]["random"][1.6])
    at = _tab(_open(_app(store["url"], monkeypatch), "compare", runs=runs), "compare_tab", "Over time")
    assert at.selectbox(key="compare_over_metric").value == "stock"
    (spec, data), = apptest.charts(at)
    assert not apptest.chart_problems(spec, data)
    each = _frame(data, "run_id", "value", "after_collapse")
    assert each["run_id"].nunique() == 8
    assert each["after_collapse"].any() and (each.loc[each["after_collapse"], "value"] == 0).all()
    thin = [layer for layer in _layers(spec) if layer.get("encoding", {}).get("detail", {}).get("field") == "run_id"]
    assert thin
    assert any("counts as 0" in c.value and "GovSim" in c.value for c in at.caption)


def test_kaplan_meier_band_is_lifelines_greenwood():
    """The band is lifelines' 95% interval (Greenwood's variance, log-log) at each time, inside [0, 1]."""
    from lifelines import KaplanMeierFitter

    times, events = [2, 3, 3, 5, 8, 8, 8], [True, True, False, True, False, False, False]
    km = cmp.kaplan_meier(times, events)
    fit = KaplanMeierFitter().fit(times, events)
    band = fit.confidence_interval_
    assert km["lo"].tolist() == pytest.approx(band.iloc[:, 0].tolist())
    assert km["hi"].tolist() == pytest.approx(band.iloc[:, 1].tolist())
    assert ((0 <= km["lo"]) & (km["lo"] <= km["survival"]) & (km["survival"] <= km["hi"]) & (km["hi"] <= 1)).all()


def test_log_rank_between_groups_is_lifelines_and_pairs_are_holm_adjusted():
    """The log-rank test over all groups equals lifelines' multivariate test; each pair's p is Holm-adjusted."""
    from lifelines.statistics import multivariate_logrank_test

    runs = pd.DataFrame({"m.survival_time": [2, 3, 4, 8, 8, 8, 5, 6, 8], "m.collapsed": [1, 1, 1, 0, 0, 0, 1, 1, 0],
                         "status": "x"})
    by = pd.Series(["a"] * 3 + ["b"] * 3 + ["c"] * 3)
    overall, pairs = cmp.logrank(runs, by)
    ref = multivariate_logrank_test(runs["m.survival_time"], by, runs["m.collapsed"])
    assert overall["chi2"] == pytest.approx(ref.test_statistic) and overall["p"] == pytest.approx(ref.p_value)
    assert overall["df"] == 2 and len(pairs) == 3
    assert (pairs["p_holm"] >= pairs["p"]).all() and pairs["p_holm"].max() <= 1
    assert cmp.holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])


def test_share_collapsed_by_each_tick_with_wilson_intervals():
    """GovSim's share collapsed by month: a run counts from its collapse on; one that ended earlier without collapsing
    leaves the denominator."""
    runs = pd.DataFrame({"m.survival_time": [1.0, 3.0, 4.0, 2.0], "m.collapsed": [1, 1, 0, 0], "status": "x",
                         "scenario": "nope", "ticks": [1, 3, 4, 2], "config": [{}] * 4})
    out = cmp.collapsed_by_tick(runs, pd.Series(["g"] * 4)).set_index("tick")
    assert out["collapsed"].tolist() == [1, 1, 2, 2] and out["runs"].tolist() == [4, 4, 3, 3]
    assert out.loc[3, "share"] == pytest.approx(2 / 3)
    assert ((out["lo"] <= out["share"]) & (out["share"] <= out["hi"])).all()


def test_survival_tab_draws_the_band_and_says_the_log_rank_test(store, monkeypatch):
    """Survival: the Kaplan-Meier chart has its band (lo, hi) under the curves, the log-rank test is stated, and the
    share collapsed by month is drawn with its interval; each interval is named by what it is."""
    runs = ",".join(store["ids"]["random"][1.3] + store["ids"]["random"][1.6])
    at = _tab(_open(_app(store["url"], monkeypatch), "compare", runs=runs), "compare_tab", "Survival")
    spec, data = _chart(at, "Kaplan-Meier")
    assert not apptest.chart_problems(spec, data)
    band = next(layer for layer in _layers(spec) if layer.get("encoding", {}).get("y2", {}).get("field") == "hi")
    assert band["encoding"]["y"]["field"] == "lo" and "Greenwood" in json.dumps(spec["title"])
    curves = _frame(data, "survival", "lo", "hi")
    assert curves["name"].nunique() == 2
    text = " ".join(m.value for m in at.markdown)
    assert re.search(r"Log-rank test over the 2 groups \(8 runs\): chi² = [\d.]+ on 1 df, p = [\d.e-]+", text), text
    spec, data = _chart(at, "Share of runs collapsed")
    assert not apptest.chart_problems(spec, data) and "Wilson" in json.dumps(spec["title"])


# ----- 5. legends, colours, order ---------------------------------------------------------------------------------------
def test_eleven_groups_have_eleven_colours_and_a_legend_of_eleven(store, monkeypatch):
    """Kaplan-Meier of 11 groups: 11 distinct colours in the scale, a legend with no symbol limit laid out in
    columns under the plot (before: 7 of 11 shown, colours repeating after 10)."""
    at = _tab(_open(_app(store["url"], monkeypatch), "compare", runs=",".join(store["ids"]["many"])),
              "compare_tab", "Survival")
    spec, data = _chart(at, "Kaplan-Meier")
    colour = next(layer["encoding"]["color"] for layer in _layers(spec)
                  if "color" in layer.get("encoding", {}) and "legend" in layer["encoding"]["color"])
    assert len(colour["scale"]["domain"]) == 11 and len(set(colour["scale"]["range"])) == 11
    assert colour["legend"]["symbolLimit"] == 0 and colour["legend"]["orient"] == "bottom" and colour["legend"]["columns"] >= 2


def test_agents_are_drawn_in_id_order(store, monkeypatch):
    """A donor game of 18 players: legends list agent 2 before agent 10 (before: as strings)."""
    at = _open(_app(store["url"], monkeypatch), "agents", run=store["ids"]["donor"])
    spec, _ = _chart(at, "Payoff per round")
    colour = next(layer["encoding"]["color"] for layer in _layers(spec) if "color" in layer.get("encoding", {}))
    ids = [int(re.match(r"agent (\d+)", label).group(1)) for label in colour["sort"]]
    assert ids == sorted(ids) and len(ids) > 10


# ----- 6. numbers as numbers ---------------------------------------------------------------------------------------------
def _axis(layer: dict, channel: str) -> dict:
    return layer.get("encoding", {}).get(channel, {}).get("axis") or {}


def test_axes_print_whole_ticks_and_short_numbers(store, monkeypatch):
    """Run → Agents: whole ticks on the x axis (before 1.00 ... 2.00), the histogram counts agents (before "Count of
    Records"); Agents: values as .4~g (before 9.500000); every tick axis of these pages is whole."""
    at = _tab(_open(_app(store["url"], monkeypatch), "run", run=store["ids"]["rich"]), "run_tab", "Agents")
    spec, _ = _chart(at, "mean and min-max")
    assert all(_axis(layer, "x").get("format") == "d" for layer in _layers(spec) if "x" in layer.get("encoding", {}))
    spec, _ = _chart(at, "Payoff distribution")
    y = spec["encoding"]["y"]
    assert y["title"] == "agents" and _axis(spec, "y")["format"] == "d"
    at = _open(at, "agents", run=store["ids"]["rich"])
    for spec, _ in apptest.charts(at):
        for layer in _layers(spec):
            enc = layer.get("encoding", {})
            if enc.get("x", {}).get("field") == "tick":
                assert _axis(layer, "x")["format"] == "d"
            if enc.get("y", {}).get("type") == "quantitative":
                assert _axis(layer, "y").get("format") == ".4~g", layer["encoding"]["y"]


def test_decisions_table_has_no_six_decimal_numbers(store, monkeypatch):
    """Agents → One agent: the Decisions table shows 9.5, not 9.500000 (a pandas Styler's default)."""
    at = _tab(_open(_app(store["url"], monkeypatch), "agents", run=store["ids"]["rich"], agent="1"), "agents_tab",
              "One agent")
    shown = []
    for el in apptest.elements(at.main):
        if getattr(el, "type", "") == "dataframe" and el.proto.arrow_data.HasField("styler"):
            shown.append(apptest._frame(el.proto.arrow_data.styler.display_values))
    assert shown, "no styled table"
    text = " ".join(str(v) for frame in shown for v in frame.to_numpy().ravel())
    assert not re.search(r"\d\.\d{6}\b", text), text[:300]


def test_forks_chart_and_policies_chart_have_titles_and_formats(tmp_path, monkeypatch):
    """The Forks chart formats its values (.4~g); the Policies chart has a title and named axes (before: a bare
    st.line_chart)."""
    url = f"sqlite:///{tmp_path / 'p.db'}"
    s = Store(url)
    code = tmp_path / "greedy.py"
    code.write_text("def policy(obs):\n    return greedy_action(obs)\n")
    synth = _run(s, "gathering", 0, ("map=small", "agents=2", "episode_steps=4", f"seed_code={code}", "iterations=2"),
                 8, policy="synthesis")
    at = _open(_app(url, monkeypatch), "policies", run=synth)
    spec, data = _chart(at, "Reward per agent")
    assert spec["encoding"]["x"]["title"].startswith("iteration") and spec["encoding"]["y"]["title"].startswith("reward")
    assert not apptest.chart_problems(spec, data)
    parent = _run(s, "commons", 0, ("fishers=3", "months=4"))
    fork = fork_run(s, parent, 2, ["reward_mode=cooperative"]).run_id
    at = _tab(_open(at, "compare", runs=f"{parent},{fork}"), "compare_tab", "Forks")
    spec, _ = _chart(at, "parent and forks")
    line = _layers(spec)[1]
    assert _axis(line, "y")["format"] == ".4~g" and _axis(line, "x")["format"] == "d"


# ----- 7. units and one word for time --------------------------------------------------------------------------------------
def test_units_and_the_scenarios_unit_of_time_everywhere(store, monkeypatch):
    """The fishery's axes say tons and months on Run, Agents and Compare (gain in tons; Kaplan-Meier in months
    survived); the grid games' metrics carry their units (apples)."""
    at = _open(_app(store["url"], monkeypatch), "agents", run=store["ids"]["rich"])
    spec, _ = _chart(at, "Payoff per month")
    assert spec["encoding"]["y"]["title"] == "payoff (tons)" and spec["encoding"]["x"]["title"] == "month"
    at = _open(at, "run", run=store["ids"]["rich"])
    assert {layer["encoding"]["x"]["title"] for spec, _ in apptest.charts(at) for layer in _layers(spec)
            if layer.get("encoding", {}).get("x", {}).get("field") == "tick"} == {"month"}
    runs = ",".join(store["ids"]["random"][1.3] + store["ids"]["random"][1.6])
    at = _open(at, "compare", runs=runs, metrics="gain")
    spec, _ = _chart(at, "gain")
    assert any(layer.get("encoding", {}).get("x", {}).get("title") == "gain (tons)" for layer in _layers(spec))
    at = _tab(at, "compare_tab", "Survival")
    spec, _ = _chart(at, "Kaplan-Meier")
    assert {layer["encoding"]["x"]["title"] for layer in _layers(spec) if "x" in layer.get("encoding", {})} == {"months survived"}
    at = _open(at, "run", run=store["ids"]["cleanup"])
    titles = {layer["encoding"]["y"].get("title") for spec, _ in apptest.charts(at) for layer in _layers(spec)
              if "y" in layer.get("encoding", {})}
    assert "apples (apples)" in titles and "collected (apples)" in titles


# ----- 8. every page has its address -----------------------------------------------------------------------------------
def test_every_page_has_its_own_address_the_runs_page_too(store, monkeypatch):
    """A shared `/runs` link opens the Runs page: every page is served at its slug (before: Runs was the default
    page, at `/` only, and `/runs` said "Page not found"); `/` goes on to Runs."""
    from app_pages.common import PAGES

    at = _app(store["url"], monkeypatch)
    served = {info["url_pathname"]: info for info in at._registered_pages.values()}
    assert {slug for slug, *_ in PAGES} <= set(served)
    assert served["runs"]["script_path"].endswith("app_pages/runs.py")
    assert at.title[0].value == "Runs"


# ----- 9. degree distributions on a linear axis --------------------------------------------------------------------------
def test_degree_distribution_is_on_a_linear_axis(store, monkeypatch):
    """A small graph's degree distribution: degrees on a quantitative axis (gaps between degrees keep their width),
    not an ordinal one; the bars' data are the graph's degrees."""
    at = _tab(_open(_app(store["url"], monkeypatch), "network", run=store["ids"]["social"]), NETWORK_VIEW,
              DEGREES)
    spec, data = _chart(at, "Degree distribution")
    assert spec["encoding"]["x"]["type"] == "quantitative" and not apptest.chart_problems(spec, data)
    bars = _frame(data, "degree", "agents")
    assert bars["agents"].sum() == 60


# ----- 10. where a run comes from ---------------------------------------------------------------------------------------
def test_run_page_says_it_is_a_fork_of_which_run_at_which_tick(store, monkeypatch):
    """A fork's Run page names its parent and branch tick, and links to the parent and to both side by side."""
    at = _open(_app(store["url"], monkeypatch), "run", run=store["ids"]["fork"])
    note = " ".join(i.value for i in at.info)
    assert f"Fork of run {store['ids']['rich']}, branched after month 1" in note
    links = [el for el in apptest.elements(at.main) if getattr(el, "type", "") == "page_link"]
    targets = [json.dumps(getattr(link.proto, "query_string", "")) + link.proto.page for link in links]
    assert any(store["ids"]["rich"] in t for t in targets), targets


def test_run_page_names_its_sweep(tmp_path, monkeypatch):
    """A run of a sweep says which sweep and links to comparing it."""
    from sqlmodel import Session

    from sim.store.tables import Run

    url = f"sqlite:///{tmp_path / 's.db'}"
    s = Store(url)
    rid = _run(s, "commons", 0, ("fishers=3", "months=2"))
    with Session(s.engine) as session:
        row = session.get(Run, rid)
        row.sweep_id = "sweep0001abc"
        session.add(row)
        session.commit()
    at = _open(_app(url, monkeypatch), "run", run=rid)
    assert any("sweep sweep0001abc" in c.value for c in at.caption)


# ----- 11. the first page loads without the engine -----------------------------------------------------------------------
def test_the_runs_page_renders_without_the_simulation_engine(store, tmp_path):
    """The Runs page (the first a visitor sees) imports neither mesa, scipy.stats nor the launcher's runner: those cost
    seconds of a first render (before: it imported runner.launcher and with it the whole runner)."""
    script = tmp_path / "first.py"
    script.write_text(
        "import os, sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        f"os.environ['SOCIETAS_DB'] = {store['url']!r}\n"
        "from streamlit.testing.v1 import AppTest\n"
        f"at = AppTest.from_file({APP!r}, default_timeout=120).run()\n"
        "assert not at.exception and at.title[0].value == 'Runs', [e.value for e in at.exception]\n"
        "print(sorted(m for m in ('mesa', 'scipy.stats', 'runner.execution', 'networkx') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


# ----- the anchors' viewers ------------------------------------------------------------------------------------------------
def test_a_month_opens_with_what_was_said_and_the_harvest_prompts(store, monkeypatch):
    """GovSim's viewer: the metric charts' points are a click selection on the tick, and the month opened (here from
    the URL, `?open=2`, where a click puts it) shows that month's messages, every decision and the harvest prompts
    and answers as stored."""
    rid = store["ids"]["llm"]
    at = _open(_app(store["url"], monkeypatch), "run", run=rid, open="2")
    params = [p for spec, _ in apptest.charts(at) for layer in _layers(spec) for p in layer.get("params", [])]
    assert any(p.get("name") == "pick" and p["select"]["fields"] == ["tick"] and p["select"]["on"] == "click"
               for p in params)
    assert any(s.value == "Month 2 of run " + rid for s in at.subheader)
    said = {e.data["text"] for e in store["store"].events(rid, tick=2) if e.kind == "message"}
    shown = {t.value for t in at.text}
    assert said and said <= shown
    calls = [c for c in store["store"].llm_calls(rid) if c.tick == 2 and c.phase == "harvest"]
    codes = {c.value for c in at.code}
    assert calls and calls[0].prompt in codes and at.radio[0].value == "harvest"


def test_the_click_selection_opens_its_tick():
    """What a click on a point hands the page (`{"selection": {"pick": [{"tick": 3}]}}`) is read as tick 3."""
    from app_pages import tick_view

    assert tick_view.selected_tick({"selection": {"pick": [{"tick": 3, "run_id": "r1"}]}}, "pick") == {"tick": 3, "run_id": "r1"}
    assert tick_view.selected_tick({"selection": {"pick": []}}, "pick") is None
    assert tick_view.selected_tick(None, "pick") is None


def test_replay_timeline_counts_each_ticks_events(store, monkeypatch):
    """AgentSociety's replay: the timeline's bars are the run's events per tick and kind, the cursor a rule, a click
    selection on the ticks; the cursor's tick is opened below."""
    rid = store["ids"]["rich"]
    at = _open(_app(store["url"], monkeypatch), "replay", run=rid, tick="3")
    spec, data = _chart(at, "What happened each month")
    assert not apptest.chart_problems(spec, data)
    bars = _frame(data, "tick", "kind", "count")
    stored = pd.Series([e.kind for e in store["store"].events(rid)]).value_counts()
    assert bars.groupby("kind")["count"].sum().sort_index().to_dict() == stored.sort_index().to_dict()
    rule = _frame(data, "tick", "label")
    assert rule["tick"].tolist() == [3]
    assert any(s.value == f"Month 3 of run {rid}" for s in at.subheader)


def test_a_cleanup_runs_steps_store_waste_and_beams_and_replay_draws_them(store, monkeypatch):
    """The grid games store the river's waste and the beams fired (decision contract 8); the board at a step with
    beams draws agents, apples, waste and beam cells as stored, and the steps animate as a GIF of one frame each."""
    from PIL import Image

    rid = store["ids"]["cleanup"]
    states = {t.tick: t.state for t in store["store"].ticks(rid)}
    busy = next(t for t, s in states.items() if s["beams"] or s["cleans"])
    metrics = {t.tick: t.metrics for t in store["store"].ticks(rid)}
    for t, s in states.items():  # waste as stored matches the run's waste share
        assert s["waste"].count("1") / len(s["waste"]) == pytest.approx(metrics[t]["waste_share"])
    at = _open(_app(store["url"], monkeypatch), "replay", run=rid, tick=str(busy))
    spec, data = _chart(at, "the board")
    assert not apptest.chart_problems(spec, data)
    cells = _frame(data, "tick", "row", "col", "layer")
    now = cells[cells["tick"] == busy]
    assert (now["layer"] == "apple").sum() == states[busy]["apples"].count("1")
    assert (now["layer"] == "waste").sum() == states[busy]["waste"].count("1")
    assert now["layer"].isin(["beam", "clean beam"]).any()
    assert {p["name"] for layer in _layers(spec) for p in layer.get("params", [])} >= {"step"}
    assert any(getattr(el, "type", "") == "image" for el in apptest.elements(at.main))
    from app_pages import grid_view
    from scenarios.registry import REGISTRY

    b = grid_frames.board(store["store"].get_run(rid).spec["config"], REGISTRY["cleanup"].maps)
    cells_all, agents = grid_frames.frames(b, states)
    image = Image.open(io.BytesIO(grid_view.animation(b, cells_all, agents, sorted(states))))
    assert image.n_frames == len(states)


def test_beam_cells_are_the_worlds():
    """The replay draws a beam with the world's own geometry: `beam_cells` is what GridWorld.beam_cells uses."""
    from scenarios.grid import maps
    from scenarios.grid.world import GridWorld, Rules, beam_cells

    grid_map = maps.parse(maps.CLEANUP_MAPS["small"])
    world = GridWorld(grid_map, Rules(beam_length=5, beam_width=3), 2, np.random.default_rng(0), __import__("random").Random(0))
    world.reset()
    for orient in range(4):
        expected = beam_cells(grid_map.walls, tuple(world.pos[0]), orient, 5, 3)
        assert world.beam_cells(0, orient) == expected


def test_an_older_grid_run_keeps_its_stored_state(tmp_path):
    """A grid run of decision contract 7 stores what it stored then (no waste, no beams): it still replays as
    stored; a new run stores both."""
    s = Store(f"sqlite:///{tmp_path / 'g.db'}")
    old = execute(build_spec("cleanup", ticks=6, sets=CLEANUP).model_copy(update={"contract": 7}), s).run_id
    new = execute(build_spec("cleanup", ticks=6, sets=CLEANUP), s).run_id
    assert "waste" not in s.ticks(old)[0].state and {"waste", "beams", "cleans"} <= set(s.ticks(new)[0].state)
    from runner.replay import replay_run

    result = replay_run(s, old)
    assert result["matched"] and result["ticks"] == 6, result


def test_memory_timeline_holds_each_item_from_entry_to_last_tick():
    """Concordia's memory timeline: an item enters at the first snapshot holding it and is held until the last; an
    item a window drops is marked forgotten."""
    snaps = [(1, {"items": [{"tick": 1, "kind": "obs", "text": "a"}]}),
             (2, {"items": [{"tick": 1, "kind": "obs", "text": "a"}, {"tick": 2, "kind": "obs", "text": "b"}]}),
             (3, {"items": [{"tick": 2, "kind": "obs", "text": "b"}, {"tick": 3, "kind": "talk", "text": "c"}],
                  "summary": "a happened"})]
    out = memories.memory_timeline(snaps, 3).set_index("text")
    assert out.loc["a", ["entered", "held_until", "forgotten"]].tolist() == [1, 2, True]
    assert out.loc["c", ["entered", "held_until", "forgotten"]].tolist() == [3, 3, False]
    assert memories.summaries(snaps)["summary"].tolist() == ["a happened"]


def test_one_agents_log_has_its_memory_timeline_and_reward_vector(store, monkeypatch):
    """Agents → One agent of an LLM fisher: the memory timeline's bars are its stored memory items, and its reward
    vector over time is every component the store holds for it, zeros filled (Sotopia's per-dimension scores)."""
    rid = store["ids"]["llm"]
    at = _tab(_open(_app(store["url"], monkeypatch), "agents", run=rid, agent="1"), "agents_tab", "One agent")
    steps = [st for st in store["store"].steps(rid) if st.agent_id == 1]
    spec, data = _chart(at, "Memory items")
    items = _frame(data, "item", "entered", "held_until")
    stored = {(i["tick"], i["text"]) for st in steps for i in (st.memory or {}).get("items", [])}
    assert set(zip(items["tick"], items["text"])) == stored and stored
    spec, data = _chart(at, "reward components")
    assert not apptest.chart_problems(spec, data) and spec["facet"]["field"] == "component"
    vec = _frame(data, "tick", "component", "value")
    for st in steps:
        for name, value in (st.components or {}).items():
            assert vec[(vec["tick"] == st.tick) & (vec["component"] == name)]["value"].tolist() == [pytest.approx(value)]
    assert len(vec) == len(steps) * vec["component"].nunique()


def test_all_agents_reward_vectors_are_summed_per_agent(store, monkeypatch):
    """Agents → All agents: each agent's reward components summed over the run, as the store holds them."""
    rid = store["ids"]["rich"]
    at = _open(_app(store["url"], monkeypatch), "agents", run=rid)
    table = next(d.value for d in at.dataframe if "fined" in d.value.columns)
    expected = vectors.vector_totals(vectors.reward_vectors(store["store"], rid)).set_index("agent_id")
    got = table.set_index("agent_id")
    for comp in expected.columns:
        assert got[comp].tolist() == pytest.approx(expected[comp].tolist())
    sums: dict = {}
    for st in store["store"].steps(rid):
        for k, v in (st.components or {}).items():
            sums[(st.agent_id, k)] = sums.get((st.agent_id, k), 0.0) + v
    assert all(got.at[a, k] == pytest.approx(v) for (a, k), v in sums.items())


def test_a_fork_and_its_parent_side_by_side_from_the_branch(store, monkeypatch):
    """Concordia's two transcripts: Compare → Forks shows the parent and the fork month by month from the branch, in two
    columns, each month's lines those of its own run, and marks the lines only one side has."""
    parent, fork = store["ids"]["rich"], store["ids"]["fork"]
    at = _tab(_open(_app(store["url"], monkeypatch), "compare", runs=f"{parent},{fork}"), "compare_tab", "Forks")
    assert any(s.value == "Transcripts side by side from the branch" for s in at.subheader)
    texts = [t.value for t in at.text]
    assert len(texts) >= 2 and len(texts) % 2 == 0
    said = {e.data["text"] for e in store["store"].events(parent, tick=2) if e.kind == "message"}
    assert any(all(line in block for line in said) for block in texts[0::2][:1])
    assert any("▸" in block for block in texts), "the fork without sanctions differs from its parent"


# ----- what the screenshots of the rich store showed (the last checks of issue 41) -------------------------------------
def _headers(at: AppTest) -> list[list[str]]:
    """Each table's column headers as shown: a column's configured label, else its name."""
    out = []
    for el in apptest.elements(at.main):
        if getattr(el, "type", "") == "dataframe":
            config = json.loads(el.proto.columns or "{}")
            labels = {k.removeprefix("col:name:"): (v or {}).get("label") for k, v in config.items()}
            out.append([labels.get(str(c)) or str(c) for c in el.value.columns])
    return out


def test_a_count_or_whole_valued_series_has_whole_ticks(store, monkeypatch):
    """Run → Trajectories: the number of greedy fishers is drawn on whole ticks (before: 0.6, 0.8, ... 1.4 fishers),
    a share keeps its fractions; Compare: months survived on whole ticks (before: 5, 5.2, 5.4 ...)."""
    at = _tab(_open(_app(store["url"], monkeypatch), "run", run=store["ids"]["rich"]), "run_tab", "Trajectories")
    at.multiselect[0].set_value(["state.strategies.greedy", "state.stock"]).run()
    spec, data = _chart(at, "state.strategies.greedy")
    counts = _frame(data, "state.strategies.greedy")["state.strategies.greedy"].dropna()
    assert len(counts) and (counts == counts.round()).all()
    assert _axis(_layers(spec)[1], "y").get("tickMinStep") == 1
    at = _tab(_tab(at, "run_tab", "Metrics"), RUN_SECTION, SOCIAL)
    spec, data = _chart(at, "perolat_equality")
    assert "tickMinStep" not in _axis(_layers(spec)[1], "y")
    runs = ",".join(store["ids"]["random"][1.3] + store["ids"]["random"][1.6])
    at = _open(at, "compare", runs=runs, by="regrowth", metrics="survival_time")
    spec, _ = _chart(at, "survival_time")
    assert _axis(_layers(spec)[1], "x").get("tickMinStep") == 1


def test_tables_and_headings_say_the_scenarios_unit_of_time(store, monkeypatch):
    """A fishery's tables on Norms, Event log and Agents' memory head their tick column "month", the log's slider and
    a month with no LLM call say month (before: "tick" beside charts saying month); a rule reads `max_catch 8`, not
    `{'max_catch': 8.0}`."""
    at = _open(_app(store["url"], monkeypatch), "norms", run=store["ids"]["rich"])
    heads = _headers(at)
    assert len(heads) >= 2 and all("tick" not in h and "month" in h for h in heads), heads
    rules = next(t.value for t in at.dataframe if "rule" in t.value.columns)["rule"]
    assert rules.str.match(r"^max_catch \d+(\.\d+)?$").all(), rules.tolist()
    at = _open(at, "events", run=store["ids"]["rich"])
    assert any(h[0] == "month" for h in _headers(at)) and any(s.label == "Months" for s in at.slider)
    at = _tab(_open(at, "agents", run=store["ids"]["llm"], agent="1"), "agents_tab", "One agent")
    memory = [h for h in _headers(at) if "text" in h and "kind" in h]
    assert memory and all(h[0] == "month" for h in memory), _headers(at)
    at = _open(at, "replay", run=store["ids"]["rich"], tick="2")
    at = _tab(at, f"tick-prompts-{store['ids']['rich']}", True)  # (Replay shows a tick's prompts on demand)
    captions = " ".join(c.value for c in at.caption)
    assert "No LLM call at this month" in captions and "this tick" not in captions


def test_side_by_side_transcripts_mark_every_line(store, monkeypatch):
    """Compare → Forks: every line of both transcripts starts with a mark (▸ one side only, · both), so the columns
    line up (before: the first line lost its two-space indent to st.text's strip and stood out)."""
    parent, fork = store["ids"]["rich"], store["ids"]["fork"]
    at = _tab(_open(_app(store["url"], monkeypatch), "compare", runs=f"{parent},{fork}"), "compare_tab", "Forks")
    lines = [line for t in at.text for line in t.value.splitlines()]
    assert lines and all(line.startswith(("▸ ", "· ")) for line in lines), lines[:5]
    assert any(line.startswith("· ") for line in lines) and any(line.startswith("▸ ") for line in lines)


def test_launch_form_shows_floats_without_padded_decimals(store, monkeypatch):
    """Launch: a fishery's float fields are shown as %g (capacity 100, regrowth 2; before 100.00, 2.00), its integer
    fields as integers."""
    monkeypatch.setenv("SOCIETAS_DB", store["url"])
    monkeypatch.setattr(sys, "argv", ["app.py", "--allow-write"])
    at = _open(AppTest.from_file(APP, default_timeout=120).run(), "launch")
    formats = {n.label: n.proto.format for n in at.number_input}
    assert formats["capacity"] == "%g" and formats["regrowth"] == "%g" and formats["fishers"] in ("", "%d"), formats
    assert not [label for label, f in formats.items() if f.endswith(".2f")]


# ----- the last of issue 41: a strategy given up, whole agent tables, a game's own legend -----------------------------
def test_a_strategy_given_up_is_drawn_at_zero_and_stays_out_of_the_stored_state(store, monkeypatch):
    """Run → Trajectories of a fishery where the greedy fishers learn to fish sustainably: the greedy count is a line
    down to 0 on every month (before: one point, the state names only the strategies in use); the stored state still
    lacks it (replays compare it)."""
    rid = store["ids"]["rich"]
    stored = {t.tick: t.state["strategies"] for t in store["store"].ticks(rid)}
    gone = [t for t, s in stored.items() if "greedy" not in s]
    assert gone and any("greedy" in s for s in stored.values()), stored
    at = _tab(_open(_app(store["url"], monkeypatch), "run", run=rid), "run_tab", "Trajectories")
    at.multiselect[0].set_value(["state.strategies.greedy", "state.strategies.sustainable"]).run()
    spec, data = _chart(at, "state.strategies.greedy")
    assert not apptest.chart_problems(spec, data)
    greedy = _frame(data, "tick", "state.strategies.greedy").set_index("tick")["state.strategies.greedy"]
    assert sorted(greedy.index) == sorted(stored)
    assert all(greedy[t] == stored[t].get("greedy", 0) for t in stored)
    assert "greedy" not in store["store"].ticks(rid)[-1].state["strategies"]


def test_counts_by_kind_are_filled_only_on_ticks_that_counted():
    """`counted`: a kind a tick's count lacks is 0 there; a tick with no count at all stays missing, and so does a
    state field that is not a count (a norm not agreed yet)."""
    from app_pages.common import counted

    ticks = pd.DataFrame({"tick": [1, 2, 3], "state.strategies.greedy": [2, None, None],
                          "state.strategies.sustainable": [4, 6, None], "state.norm": [None, 8.0, None]})
    out = counted(ticks)
    assert out["state.strategies.greedy"].tolist()[:2] == [2, 0] and out["state.strategies.sustainable"].tolist()[:2] == [4, 6]
    assert out.loc[2, ["state.strategies.greedy", "state.strategies.sustainable", "state.norm"]].isna().all()
    assert out["state.norm"].isna().tolist() == [True, False, True] and ticks["state.strategies.greedy"].isna().sum() == 2


def _tables_drawn(monkeypatch) -> list[dict]:
    """Every st.dataframe call of the pages run after this: its rows, height and column config (what the browser gets)."""
    import streamlit

    calls: list[dict] = []
    real = streamlit.dataframe

    def spy(data=None, *args, **kwargs):
        frame = data.data if hasattr(data, "data") and not isinstance(data, pd.DataFrame) else data
        calls.append({"frame": frame, "height": kwargs.get("height", "auto"), "config": kwargs.get("column_config") or {}})
        return real(data, *args, **kwargs)

    monkeypatch.setattr(streamlit, "dataframe", spy)
    return calls


def test_agent_tables_show_every_row_and_keep_the_id_in_view(store, monkeypatch):
    """Agents: the 12 donors' table and their reward vectors are shown whole (before: cut at 10 rows), each with its
    agent id pinned while a wide table scrolls sideways, without a column no agent fills (an empty persona), under
    short headers; a community of 60 scrolls within 20 rows."""
    calls = _tables_drawn(monkeypatch)
    at = _open(_app(store["url"], monkeypatch), "agents", run=store["ids"]["donor"])
    agents = [c for c in calls if "strategy" in c["frame"].columns]
    vectors_ = [c for c in calls if "received" in c["frame"].columns and "agent" in c["frame"].columns]
    assert agents and vectors_
    donors = len(queries.run_agents(store["engine"], store["ids"]["donor"]))
    assert donors > 10
    for call in (agents[-1], vectors_[-1]):
        assert len(call["frame"]) == donors and call["height"] == "content"
        assert json.loads(json.dumps(call["config"]["agent_id"]))["pinned"] is True
    assert "persona" not in agents[-1]["frame"].columns
    heads = next(h for h in _headers(at) if "strategy" in h)
    assert "usage_decisions" not in heads and "sanctions_received" not in heads and max(map(len, heads)) <= 16, heads
    calls.clear()
    from app_pages import tables

    _open(at, "agents", run=store["ids"]["social"])
    big = [c for c in calls if "strategy" in c["frame"].columns or "role" in c["frame"].columns][-1]
    assert len(big["frame"]) == 60 and big["height"] == tables.HEADER_PX + tables.ROW_PX * tables.SCROLL_ROWS


def test_the_boards_legend_lists_only_what_the_game_has(store, monkeypatch, tmp_path):
    """Replay of a Gathering game: the board's legend lists walls, apples, the tagging beam and tagged-out agents, not
    Cleanup's river, waste and cleaning beam (before: every layer of both games), nor does its animation's caption;
    Cleanup's list those too."""
    s = Store(f"sqlite:///{tmp_path / 'g.db'}")
    gathering = _run(s, "gathering", 0, ("map=small", "agents=4", "episode_steps=20"), 6)

    def legend(url: str, rid: str) -> list[str]:
        at = _open(_app(url, monkeypatch), "replay", run=rid, tick="3")
        said = " ".join(i.caption for el in apptest.elements(at.main) if getattr(el, "type", "") == "image"
                        for i in el.proto.imgs)
        assert ("river" in said) == (rid == store["ids"]["cleanup"]), said
        spec, data = _chart(at, "the board")
        assert not apptest.chart_problems(spec, data)
        colours = [layer["encoding"]["color"] for layer in _layers(spec)
                   if layer.get("encoding", {}).get("color", {}).get("field") == "layer"]
        assert colours
        return colours[0]["scale"]["domain"]

    assert legend(f"sqlite:///{tmp_path / 'g.db'}", gathering) == ["wall", "apple", "beam", "tagged out"]
    assert set(legend(store["url"], store["ids"]["cleanup"])) == {"wall", "river", "apple", "waste", "beam", "clean beam",
                                                                  "tagged out"}
