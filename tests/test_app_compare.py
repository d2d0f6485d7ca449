"""The Compare page: pooling (backend, lineage), no silent cap, intervals within bounds, Kaplan-Meier to the
horizon, uncut group labels, reward-mode points, metrics over time, exports; and the pure functions behind it."""

from __future__ import annotations

import copy
import json
import math

import pandas as pd
import pytest

pytest.importorskip("streamlit")
from sqlmodel import Session  # noqa: E402
from streamlit.testing.v1 import AppTest  # noqa: E402

from analysis import compare as cmp  # noqa: E402
from runner.config import build_spec  # noqa: E402
from runner.execution import execute  # noqa: E402
from runner.resume import fork_run  # noqa: E402
from sim.store.store import Store  # noqa: E402
from sim.store.tables import Run  # noqa: E402
from tests import apptest  # noqa: E402

SMALL = ("fishers=3", "months=3")
GREEDY = "population=[{count: 3, strategy: greedy}]"  # collapses in month 1


def _compare_page() -> None:
    """The Compare page on its own (as the app's navigation runs it)."""
    import os
    import runpy
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__import__("analysis").__file__)))
    if root not in sys.path:
        sys.path.insert(0, root)
    runpy.run_path(f"{root}/app_pages/compare.py", run_name="__main__")


def _copy_run(store: Store, run_id: str, new_id: str, **changes) -> str:
    """A copy of a stored run's row (no ticks) under a new id, with `changes` to its columns or spec."""
    with Session(store.engine) as s:
        row = s.get(Run, run_id)
        data = row.model_dump()
        spec = copy.deepcopy(data["spec"])
        spec.update(changes.pop("spec", {}))
        data.update(id=new_id, spec=spec, **changes)
        s.add(Run(**data))
        s.commit()
    return new_id


@pytest.fixture(scope="module")
def mixed(tmp_path_factory) -> dict:
    """Commons: 3 private seeds, 2 cooperative, 2 greedy (collapse), a fork of the first, an LLM copy of the second."""
    url = f"sqlite:///{tmp_path_factory.mktemp('compare') / 'runs.db'}"
    store = Store(url)
    ids: dict = {"private": [], "cooperative": [], "greedy": []}
    for seed in range(3):
        ids["private"].append(execute(build_spec("commons", seed=seed, sets=SMALL), store).run_id)
    for seed in range(2):
        ids["cooperative"].append(execute(build_spec("commons", seed=seed, sets=(*SMALL, "reward_mode=cooperative")),
                                          store).run_id)
        ids["greedy"].append(execute(build_spec("commons", seed=seed, sets=(*SMALL, GREEDY)), store).run_id)
    ids["fork"] = fork_run(store, ids["private"][0], 1, []).run_id
    llm = {"provider": "local", "model": "SmolLM2-tiny"}
    ids["llm"] = _copy_run(store, ids["private"][1], "llmcopy00001", policy="llm", spec={"policy": "llm", "llm": llm})
    return {"url": url, "ids": ids, "store": store}


def _at(url: str, monkeypatch, params: dict | None = None) -> AppTest:
    monkeypatch.setenv("SOCIETAS_DB", url)
    at = AppTest.from_function(_compare_page, default_timeout=60)
    for k, v in (params or {}).items():
        at.query_params[k] = v
    return at.run()


def _tab(at: AppTest, name: str) -> AppTest:
    at.session_state["compare_tab"] = name
    at.run()
    assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
    return at


def _buttons(at: AppTest) -> list:
    return [el for el in apptest.elements(at.main) if getattr(el, "type", "") == "download_button"]


def _layers(spec: dict) -> list[dict]:
    return spec.get("layer", [spec])


def _summary(at: AppTest) -> pd.DataFrame:
    return next(d.value for d in at.dataframe if "metric" in d.value.columns)


# ----- the page --------------------------------------------------------------------------------------------------
def test_pools_only_equal_scenario_backend_config_and_lineage(mixed, monkeypatch):
    """The LLM run and the fork are not seeds of the private group: each is its own group, the fork so labelled."""
    ids = mixed["ids"]
    at = _at(mixed["url"], monkeypatch)
    assert not at.exception and not at.error
    summary = _summary(at)
    part = summary[summary["metric"] == summary["metric"].iloc[0]]
    assert part["n"].sum() == 9 and len(part) == 5, part[["group", "n"]]
    fork = part[part["group"].str.contains(f"fork of {ids['private'][0]} at tick 1")]
    llm = part[part["group"].str.contains("llm:local SmolLM2-tiny")]
    assert fork["n"].tolist() == [1] and llm["n"].tolist() == [1]
    private = part[~part["group"].str.contains("fork|llm|greedy|cooperative")]
    assert private["n"].tolist() == [3]
    legend = at.table[0].value
    assert len(legend) == 5 and any("fork of" in str(v) for v in legend.to_numpy().ravel())


def test_default_is_every_ended_run_and_the_url_holds_the_choice(tmp_path, monkeypatch):
    """35 runs of a scenario: all are chosen (no cap of 30); the ids and group-by fields go in the URL, and a link
    with ?runs= and ?by= opens exactly that choice."""
    url = f"sqlite:///{tmp_path / 'runs.db'}"
    store = Store(url)
    first = execute(build_spec("commons", seed=0, sets=("fishers=3", "months=2")), store).run_id
    copies = [_copy_run(store, first, f"copy{i:08d}", seed=i + 1) for i in range(34)]
    at = _at(url, monkeypatch)
    assert not at.exception and not at.error
    runs = next(m for m in at.multiselect if m.label == "Runs")
    assert len(runs.value) == 35
    assert "runs" not in at.query_params  # every run: the default needs no list in the URL
    shown = _summary(at)
    assert shown["n"].max() == 35
    linked = _at(url, monkeypatch, {"runs": f"{copies[0]},{copies[1]}", "by": "-"})
    assert next(m for m in linked.multiselect if m.label == "Runs").value == [copies[0], copies[1]]
    assert _summary(linked)["n"].max() == 2


def test_intervals_stay_within_values_and_bounds(mixed, monkeypatch):
    """Greedy runs all collapse with equality 1.0; private runs never collapse: every interval lies in [0, 1]; a
    bootstrap interval within its group's values; a collapse rate keeps its Wilson interval (all 3 collapsed is
    not "certainly 1": [0.44, 1])."""
    at = _at(mixed["url"], monkeypatch)
    next(m for m in at.multiselect if m.label == "Final metrics").set_value(["collapsed", "equality", "efficiency"]).run()
    assert not at.exception and not at.error
    summary = _summary(at)
    with_ci = summary.dropna(subset=["lo", "hi"])
    assert len(with_ci) >= 6
    for _, row in with_ci.iterrows():
        assert 0.0 <= row["lo"] <= row["mean"] <= row["hi"] <= 1.0, row.to_dict()
    collapsed = with_ci[with_ci["metric"] == "collapsed"]
    assert (collapsed["method"] == "wilson").all()
    for _, row in collapsed.iterrows():  # all or none collapsed: the interval reaches the observed end, and is wide
        assert (row["hi"] == 1.0 and row["lo"] < 0.7) or (row["lo"] == 0.0 and row["hi"] > 0.3), row.to_dict()

    for _, data in apptest.charts(at):  # the drawn error bars too
        for frame in data.values():
            if {"lo", "hi"} <= set(frame.columns):
                assert frame.dropna(subset=["lo"]).eval("lo >= 0 and hi <= 1").all()


def test_survival_curve_runs_to_the_horizon(mixed, monkeypatch):
    """Kaplan-Meier: the private group never collapses, so its curve is flat at 1.0 from 0 to 3 months; the x axis
    reaches the horizon though the greedy runs collapse in month 1. The summary table stays."""
    at = _tab(_at(mixed["url"], monkeypatch), "Survival")
    summary = at.dataframe[0].value
    assert {"share_collapsed", "mean_survival_time", "runs"} <= set(summary.columns)
    spec, data = apptest.charts(at)[0]  # the Kaplan-Meier curves (the share collapsed by month follows them)
    curves = next(f for f in data.values() if "survival" in f.columns)
    private = summary[~summary["group"].str.contains("fork|llm|greedy|cooperative")]["group"].iloc[0]
    line = curves[curves["group"] == private]
    assert line["time"].min() == 0 and line["time"].max() == 3.0 and set(line["survival"]) == {1.0}
    greedy = summary[summary["group"].str.contains("greedy")]["group"].iloc[0]
    assert curves[curves["group"] == greedy]["survival"].min() == 0.0
    assert summary.set_index("group").at[greedy, "share_collapsed"] == 1.0
    xs = [layer["encoding"]["x"] for layer in _layers(spec) if "x" in layer.get("encoding", {})]
    assert xs and all((x.get("scale") or {}).get("domain", [0, None])[1] == 3.0 for x in xs)


def test_group_labels_in_charts_are_short_distinct_and_never_cut(mixed, monkeypatch):
    """Charts name groups G1, G2, ... (distinct), never truncate them (labelLimit 0), and the full labels are in the
    legend table and tooltips."""
    at = _at(mixed["url"], monkeypatch)
    charts = apptest.charts(at)
    assert charts
    for spec, data in charts:
        for layer in _layers(spec):
            enc = layer.get("encoding", {})
            for channel in ("y", "color"):
                if channel in enc and enc[channel].get("type") == "nominal":
                    limit = (enc[channel].get("axis") or enc[channel].get("legend") or {}).get("labelLimit")
                    assert limit == 0, (channel, enc[channel])
        field = _layers(spec)[0]["encoding"]["y"]["field"]
        dots = next(f for f in data.values() if "run_id" in f.columns)
        assert dots[field].nunique() == 5 and all(len(n) <= 4 for n in dots[field].unique())
        pairs = dots[[field, "label"]].drop_duplicates()
        assert pairs[field].is_unique and pairs["label"].is_unique and len(pairs) == 5
    assert set(at.table[0].value.index) == {f"G{i}" for i in range(1, 6)}


def _plot(spec: dict, data: dict[str, pd.DataFrame], width: int) -> tuple[float, list[int]]:
    """The plot area's width and the item count of each symbol mark when drawn `width` pixels wide (vl-convert)."""
    import vl_convert as vlc

    spec = dict(spec, width=width, datasets={k: json.loads(v.to_json(orient="records")) for k, v in data.items()})
    graph = vlc.vegalite_to_scenegraph(spec)
    symbols = []

    def walk(node):
        if isinstance(node, dict):
            if node.get("marktype") == "symbol" and str(node.get("name", "")).endswith("_marks"):
                symbols.append(len(node.get("items", [])))
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(graph)
    root = graph["scenegraph"]["items"][0] if "scenegraph" in graph else graph["items"][0]
    return float(root.get("width") or 0), symbols


def test_reward_modes_chart_shows_each_run_as_a_point(mixed, monkeypatch):
    """The ablation's charts plot one dot per run inside a plot area that keeps its width in a narrow column (long
    labels ate it: the dots were all drawn at x = 0)."""
    at = _tab(_at(mixed["url"], monkeypatch), "Reward modes")
    charts = apptest.charts(at)
    assert len(charts) >= 2
    for spec, data in charts:
        dots = next(f for f in data.values() if "run_id" in f.columns)
        assert len(dots) == 9 and set(dots["group"].str.split(" · ").str[0]) == {"private", "cooperative"}
        width, symbols = _plot(spec, data, 400)
        assert width >= 200, width
        assert 9 in symbols


def test_over_time_shows_mean_and_band_per_group_with_reference_lines(mixed, monkeypatch):
    """Over time: the fishery's stock per group (mean line, min-max band) in tons, with the collapse line."""
    at = _at(mixed["url"], monkeypatch)
    assert "Over time" in [t.label for t in at.tabs]
    _tab(at, "Over time")
    assert at.selectbox(key="compare_over_metric").value == "stock"
    (spec, data), = apptest.charts(at)
    frame = next(f for f in data.values() if {"mean", "lo", "hi", "tick"} <= set(f.columns))
    assert frame["name"].nunique() == 4  # the LLM copy stored no ticks
    assert (frame["lo"] <= frame["mean"]).all() and (frame["mean"] <= frame["hi"]).all()
    private = frame[frame["runs"] == 3]
    assert sorted(private["tick"]) == [1, 2, 3]
    lines = next(f for f in data.values() if "label" in f.columns and "value" in f.columns and "tick" not in f.columns)
    assert "collapse" in set(lines["label"])
    titles = [layer.get("encoding", {}).get("y", {}).get("title") for layer in _layers(spec)]
    assert "stock (tons)" in titles
    assert at.query_params["metric"] == "stock"


def test_every_chart_exports_and_the_report_holds_tables_and_figures(mixed, monkeypatch):
    """Each chart has PNG and SVG downloads; the HTML report has the groups, the tables and the figures as SVG."""
    from app_pages import export

    builds = []
    real = export.report_button

    def spy(title, build, **kwargs):
        builds.append((title, build))
        real(title, build, **kwargs)

    monkeypatch.setattr(export, "report_button", spy)
    at = _at(mixed["url"], monkeypatch)
    for tab in ("Across seeds", "Reward modes", "Survival", "Over time", "Forks"):
        _tab(at, tab)
        labels = [b.proto.label for b in _buttons(at)]
        n = len(apptest.charts(at))
        assert n >= 1 and labels.count("PNG") == n and labels.count("SVG") == n, (tab, labels)
        assert "HTML report" in labels
    title, build = builds[-1]
    html = export.html_report(title, build())
    assert html.count("<svg") >= 5 and "share_collapsed" in html and "G5" in html and "stock over time" in html


# ----- the pure functions ---------------------------------------------------------------------------------------------
def _frame(rows: list[dict]) -> pd.DataFrame:
    base = {"scenario": "commons", "status": "finished", "seed": 0, "policy": "scripted", "backend": "scripted",
            "config": {}, "parent_id": None, "branch_tick": None, "ticks": 3}
    return pd.DataFrame([{**base, "run_id": f"r{i}", **r} for i, r in enumerate(rows)])


def test_group_labels_split_backend_lineage_and_config():
    runs = _frame([{"config": {"a": 1}}, {"config": {"a": 1}, "seed": 1},
                   {"config": {"a": 1}, "policy": "llm", "backend": "llm:local tiny"},
                   {"config": {"a": 1}, "parent_id": "r0", "branch_tick": 2}, {"config": {"a": 2}}])
    labels = cmp.group_labels(runs)
    assert labels[0] == labels[1] and labels.nunique() == 4
    assert "llm:local tiny" in labels[2] and labels[3].endswith("fork of r0 at tick 2")
    pooled = cmp.group_labels(runs, keys=[])  # pooling over every config field keeps backend and lineage apart
    assert pooled[0] == pooled[1] == pooled[4] and pooled.nunique() == 3
    names = cmp.short_names(labels)
    assert sorted(names.values()) == ["G1", "G2", "G3", "G4"]
    legend = cmp.legend(runs, labels, names)
    assert legend["name"].tolist() == ["G1", "G2", "G3", "G4"] and legend["runs"].sum() == 5


def test_intervals_are_clipped_to_bounds_and_a_bootstrap_to_the_values():
    """Every interval lies in the metric's bounds; a bootstrap one also within the values; a rate keeps its Wilson
    interval (all of 3 runs collapsed: about [0.44, 1], not the certainty [1, 1])."""
    assert cmp.metric_bounds("equality") == (0.0, 1.0) and cmp.metric_bounds("donation_rate") == (0.0, 1.0)
    assert cmp.metric_bounds("gain") == (-math.inf, math.inf)
    for values, metric in (([1, 1, 1], "collapsed"), ([0, 0, 0, 0], "collapsed"), ([0.999, 1.0, 1.0, 1.0], "equality"),
                           ([0.0, 0.001, 0.0], "over_usage"), ([1, 0, 1, 1], "collapsed"), ([0.2, 0.9, 1.0], "equality")):
        ci = cmp.mean_ci(values, metric)
        assert 0 <= ci["lo"] <= ci["mean"] <= ci["hi"] <= 1, (values, ci)
        if ci["method"] != "wilson":
            assert min(values) <= ci["lo"] and ci["hi"] <= max(values), (values, ci)
    all_collapsed = cmp.mean_ci([1, 1, 1], "collapsed")
    assert all_collapsed["hi"] == 1.0 and 0.3 < all_collapsed["lo"] < 0.6


def test_kaplan_meier_uses_lifelines_and_runs_to_the_last_time():
    from lifelines import KaplanMeierFitter

    flat = cmp.kaplan_meier([4, 4, 4], [False, False, False])
    assert flat["time"].tolist() == [0.0, 4.0] and flat["survival"].tolist() == [1.0, 1.0]
    times, events = [2, 2, 5, 12, 12], [True, False, True, False, False]
    km = cmp.kaplan_meier(times, events)
    ref = KaplanMeierFitter().fit(times, events).survival_function_.iloc[:, 0]
    assert km["time"].tolist() == [0.0, 2.0, 5.0, 12.0]
    assert km["survival"].tolist() == pytest.approx(ref.tolist())
    assert km["survival"].iloc[-1] == pytest.approx(0.8 * (1 - 1 / 3))
    runs = _frame([{"m.survival_time": 3.0, "m.collapsed": 0.0, "config": {"months": 3}},
                   {"m.survival_time": 1.0, "m.collapsed": 1.0, "config": {"months": 3}, "seed": 1}])
    summary, curves = cmp.survival(runs, pd.Series(["g", "g"]))
    assert summary["horizon"].tolist() == [3.0] and summary["share_collapsed"].tolist() == [0.5]
    assert curves["time"].max() == 3.0


def test_over_time_and_reference_lines():
    frames = {"a": pd.DataFrame({"tick": [1, 2, 3], "stock": [90.0, 80.0, 70.0]}),
              "b": pd.DataFrame({"tick": [1, 2], "stock": [50.0, 40.0]}),
              "c": pd.DataFrame({"tick": [1], "stock": [10.0]})}
    out = cmp.over_time(frames, {"a": "g1", "b": "g1", "c": "g2"}, "stock")
    g1 = out[out["group"] == "g1"].set_index("tick")
    assert g1.loc[1, ["runs", "mean", "lo", "hi"]].tolist() == [2, 70.0, 50.0, 90.0] and g1.loc[3, "runs"] == 1
    assert cmp.tick_metrics(frames.values()) == ["stock"]
    runs = _frame([{"config": {"collapse_below": 5.0}}, {"config": {"collapse_below": 8.0}}])
    lines = cmp.reference_lines(runs, pd.Series(["x", "y"]), "stock")
    if not lines.empty:  # the scenario declares reference lines
        collapse = lines[lines["label"] == "collapse"]
        assert sorted(collapse["value"]) == [5.0, 8.0] and set(collapse["group"]) == {"x", "y"}
        shared = lines[lines["label"] != "collapse"]
        assert set(shared["group"]) == {""}
    assert cmp.scenario_units("commons").get("stock", "tons") == "tons"


def test_a_name_that_suggests_a_share_does_not_clip_values_beyond_it():
    """The grid games' `efficiency` is apples per step: values above 1 keep their mean and interval."""
    ci = cmp.mean_ci([3.2, 3.5, 3.9], "efficiency")
    assert ci["mean"] == pytest.approx(3.5333, abs=1e-3) and 3.2 <= ci["lo"] < ci["mean"] < ci["hi"] <= 3.9
    assert cmp.value_bounds("efficiency", [3.2, 3.5]) == (-math.inf, math.inf)
    assert cmp.value_bounds("efficiency", [0.2, 0.5]) == (0.0, 1.0)
