"""The app's views tell the truth about a run: the Network page draws the graph the run had (its seeded follows
included), Agents lists every agent that ever took part with who it is, the Run page's charts carry integer ticks,
units and reference lines, Norms keeps colours and ticks fixed; the URL holds the view; exports are what is drawn.

Each test names the defect it guards against (the issue "The app a researcher trusts")."""

from __future__ import annotations


import pandas as pd
import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

from sim.store import queries  # noqa: E402
from runner.config import build_spec  # noqa: E402
from runner.execution import execute  # noqa: E402
from sim.store.store import Store  # noqa: E402
from tests import apptest  # noqa: E402
from tests.test_app import APP  # noqa: E402

RICH = ["fishers=5", "sanctions=true", "population=[{count: 2, strategy: greedy}, {count: 3, strategy: sustainable}]"]


@pytest.fixture(scope="module")
def views(tmp_path_factory) -> dict:
    """A social run (seeded follow graph), a donor run over three generations, a market, a commons run with sanctions."""
    url = f"sqlite:///{tmp_path_factory.mktemp('views') / 'runs.db'}"
    store = Store(url)
    ids = {
        "social": execute(build_spec("social", seed=3, sets=("agents=80", "ticks=3")), store).run_id,
        "donor": execute(build_spec("donor", seed=1, sets=("agents=6", "generations=3", "rounds=2")), store).run_id,
        "market": execute(build_spec("market", seed=0, ticks=2), store).run_id,
        "commons": execute(build_spec("commons", seed=2, ticks=4, sets=tuple(RICH)), store).run_id,
    }
    return {"url": url, "store": store, "ids": ids, "engine": queries.open_reader(url)}


def _app(url: str, monkeypatch) -> AppTest:
    monkeypatch.setenv("SOCIETAS_DB", url)
    return AppTest.from_file(APP, default_timeout=90).run()


def _open(at: AppTest, page: str, run_id: str, **params: str) -> AppTest:
    at.query_params["run"] = run_id
    for k, v in params.items():
        at.query_params[k] = v
    at.switch_page(f"app_pages/{page}.py").run()
    assert not at.exception and not at.error, (page, [e.value for e in (*at.exception, *at.error)])
    return at


def _specs(at: AppTest) -> list[dict]:
    """The Vega-Lite specs of the charts on the page, their data as records under `datasets`."""
    return [{**spec, "datasets": {name: frame.to_dict("records") for name, frame in data.items()}}
            for spec, data in apptest.charts(at)]


def _agent_box(at: AppTest):
    return next(s for s in at.selectbox if s.label.startswith("Agent"))


def _layers(spec: dict) -> list[dict]:
    out = [spec]
    for layer in spec.get("layer", []):
        out += _layers(layer)
    return out


# ----- Network -------------------------------------------------------------------------------------------------
def test_network_edges_and_reciprocity_equal_the_runs_own_metrics(views, monkeypatch):
    """The follow graph is the seeded graph changed by the run's events: the page's edge count and reciprocity are
    the run's final `follow_edges` and `reciprocity` (before: only the run's own follows, 22 of 456 edges)."""
    run_id = views["ids"]["social"]
    final = views["store"].get_run(run_id).final_metrics
    ticks = queries.tick_frame(views["engine"], run_id)
    at = _open(_app(views["url"], monkeypatch), "network", run_id)
    shown = {m.label: m.value for m in at.metric}
    assert int(shown["edges"]) == int(ticks["follow_edges"].iloc[-1]) > 100
    assert float(shown["reciprocity"]) == pytest.approx(final["reciprocity"], abs=5e-3)
    # at the first tick too: the graph at any tick
    at = _open(at, "network", run_id, tick="1")
    assert int({m.label: m.value for m in at.metric}["edges"]) == int(ticks["follow_edges"].iloc[0])


def test_network_edges_point_from_source_to_target(views, monkeypatch):
    """Each drawn edge has an arrowhead at its target, turned along the edge (before: plain undirected rules)."""
    at = _open(_app(views["url"], monkeypatch), "network", views["ids"]["social"])
    layers = [l for s in _specs(at) for l in _layers(s)]
    heads = [l for l in layers if isinstance(l.get("mark"), dict) and l["mark"].get("shape") == "triangle-up"]
    assert heads and heads[0]["encoding"]["angle"]["field"] == "angle"


def test_network_tells_customers_from_businesses(views, monkeypatch):
    """A market's interaction graph colours and shapes nodes by role (before: every node alike)."""
    at = _open(_app(views["url"], monkeypatch), "network", views["ids"]["market"])
    layers = [l for s in _specs(at) for l in _layers(s)]
    roles = [l for l in layers if l.get("encoding", {}).get("shape", {}).get("field") == "role"]
    assert roles
    data = {d["role"] for s in _specs(at) for rows in s.get("datasets", {}).values() for d in rows if "role" in d}
    assert data == {"customer", "business"}


def test_seeded_graph_and_agents_survive_fork_and_go_with_delete(views, tmp_path):
    """A fork keeps the parent's initial state and agents up to its branch; deleting a run deletes its agents."""
    from runner.resume import fork_run

    store = Store(f"sqlite:///{tmp_path / 'f.db'}")
    parent = execute(build_spec("social", seed=4, sets=("agents=30", "ticks=3")), store).run_id
    child = fork_run(store, parent, 2, ["reward_mode=cooperative"]).run_id
    p, c = store.get_run(parent), store.get_run(child)
    assert c.initial == p.initial and len(p.initial["follows"]) > 10
    assert [a.agent_id for a in store.run_agents(child)] == [a.agent_id for a in store.run_agents(parent)]
    assert store.delete_run(child)
    assert store.run_agents(child) == []


# ----- Agents --------------------------------------------------------------------------------------------------
def test_a_donor_run_lists_every_agent_it_had(views, monkeypatch):
    """Three generations of six: every player that ever played is listed with its generation (before: only the
    first tick's six)."""
    run_id = views["ids"]["donor"]
    steps = views["store"].steps(run_id)
    distinct = {s.agent_id for s in steps}
    first = {s.agent_id for s in steps if s.tick == 1}
    assert len(distinct) > len(first)
    at = _open(_app(views["url"], monkeypatch), "agents", run_id)
    table = at.dataframe[0].value
    assert set(table["agent_id"]) == distinct
    assert set(table["generation"]) == {1, 2, 3} and table["strategy"].notna().all()
    at.session_state["agents_tab"] = "One agent"
    at.run()
    assert len(_agent_box(at).options) == len(distinct)


def test_agents_are_named_by_role_strategy_and_persona(views, monkeypatch):
    """The per-agent table says who each agent is and shows over-usage, violations and sanctions (GovSim's view)."""
    at = _open(_app(views["url"], monkeypatch), "agents", views["ids"]["commons"])
    table = at.dataframe[0].value
    assert set(table["strategy"]) == {"greedy", "sustainable"} and set(table["role"]) == {"fisher"}
    greedy = table[table["strategy"] == "greedy"]
    assert (greedy["over_usage"] > 0).all() and (table[table["strategy"] == "sustainable"]["over_usage"] == 0).all()
    assert {"violations", "sanctions_received", "sanctions_given"} <= set(table.columns)
    titles = [s.get("title", {}) for s in _specs(at)]
    assert any("Payoff per month" in str(t) for t in titles) and any("Action per month" in str(t) for t in titles)  # (the fishery counts months)


def test_payoff_is_not_hidden_under_an_identical_reward_line(views, monkeypatch):
    """With reward = payoff (private mode), one payoff line and a note, not two lines drawn on top of each other."""
    at = _open(_app(views["url"], monkeypatch), "agents", views["ids"]["commons"])
    at.session_state["agents_tab"] = "One agent"
    at.run()
    assert any("equals the payoff" in c.value for c in at.caption)


# ----- Run -----------------------------------------------------------------------------------------------------
def test_run_page_has_no_nan_reason_integer_ticks_units_and_lines(views, monkeypatch):
    """A run ended without a reason says nothing about it (before: "ended: nan"); the stock chart has whole ticks,
    tons, the collapse and sustainable lines; numbers are printed without trailing zeros."""
    at = _open(_app(views["url"], monkeypatch), "run", views["ids"]["commons"])
    assert not any("nan" in c.value for c in at.caption)
    stock = next(s for s in _specs(at) for l in _layers(s) if l.get("encoding", {}).get("y", {}).get("field") == "stock")
    line = next(l for l in _layers(stock) if l.get("encoding", {}).get("y", {}).get("field") == "stock")
    assert line["encoding"]["x"]["axis"]["format"] == "d" and line["encoding"]["y"]["axis"]["format"] == ".4~g"
    assert line["encoding"]["y"]["title"] == "stock (tons)"
    refs = {d["line"] for rows in stock["datasets"].values() for d in rows if "line" in d}
    assert refs == {"collapse", "sustainable: regrows to capacity"}


def test_donor_clock_is_not_plotted_as_a_metric(views, monkeypatch):
    """generation/game/round are the donor game's clock: no chart of them (before: plotted as metrics)."""
    at = _open(_app(views["url"], monkeypatch), "run", views["ids"]["donor"])
    plotted = {l.get("encoding", {}).get("y", {}).get("field") for s in _specs(at) for l in _layers(s)}
    assert not plotted & {"generation", "game", "round"}
    assert "mean_resources" in plotted


# ----- Norms ---------------------------------------------------------------------------------------------------
def test_norm_colours_are_fixed_and_every_tick_is_on_the_axis(views, monkeypatch):
    """A kind has the same colour in every run, and ticks without norm events keep their place on the axis."""
    from sim.reward.norms import KINDS

    at = _open(_app(views["url"], monkeypatch), "norms", views["ids"]["commons"])
    spec = next(s for s in _specs(at) if "Norm events" in str(s.get("title")))
    assert spec["encoding"]["color"]["scale"]["domain"][: len(KINDS)] == list(KINDS)
    assert spec["encoding"]["x"]["scale"]["domain"] == list(range(1, 5))
    limit = next(s for s in _specs(at) if "Limit per agent" in str(s.get("title")))
    series = {d["series"] for rows in limit["datasets"].values() for d in rows if "series" in d}
    assert series == {"limit in force", "mean harvest", "largest harvest"}


# ----- URL state, exports ----------------------------------------------------------------------------------------
def test_the_url_holds_run_tab_tick_and_agent(views, monkeypatch):
    """Opening `?run=..&tab=..&tick=..&agent=..` shows that view: a copied link reproduces it."""
    run_id = views["ids"]["commons"]
    at = _open(_app(views["url"], monkeypatch), "agents", run_id, tab="One agent", agent="3")
    assert at.session_state["agents_tab"] == "One agent" and _agent_box(at).value == 3
    at = _open(at, "network", run_id, tick="2")
    assert at.slider[0].value == 2 and at.query_params["tick"] in ("2", ["2"])
    at = _open(at, "run", run_id)  # the cursor is shared: the Run page's Agents tab opens on it
    at.session_state["run_tab"] = "Agents"
    at.run()
    assert at.query_params["tab"] in ("Agents", ["Agents"]) and at.slider[0].value == 2


def test_exports_are_the_figure_and_a_report_that_escapes_text():
    """PNG and SVG come from the chart itself; an HTML report embeds SVG and escapes LLM text (no markup gets in)."""
    import altair as alt

    from app_pages import export

    chart = alt.Chart(pd.DataFrame({"tick": [1, 2], "v": [1.0, 2.0]})).mark_line().encode(x="tick:Q", y="v:Q")
    assert export.png(chart).startswith(b"\x89PNG") and export.svg(chart).lstrip().startswith("<svg")
    page = export.html_report("Run <x>", ["Said", ("text", "<script>alert(1)</script> 1. first"), chart,
                                          pd.DataFrame({"who": ["<b>agent</b>"]})])
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;agent" in page and "<svg" in page


def test_over_usage_counts_every_tick_of_a_run_longer_than_one_case(tmp_path, monkeypatch):
    """A run of more ticks than one SQL CASE holds: the over-usage counts are those of a tick-by-tick recount."""
    from sim.store import queries as qs
    from analysis.usage import over_usage

    monkeypatch.setattr(qs, "TICKS_PER_CASE", 3)
    store = Store(f"sqlite:///{tmp_path / 'long.db'}")
    run_id = execute(build_spec("commons", seed=1, ticks=8, sets=tuple(RICH[:1] + RICH[2:])), store).run_id
    eng = qs.open_reader(store.url)
    got = over_usage(eng, run_id, "commons", store.get_run(run_id).spec["config"]).set_index("agent_id")
    cls = __import__("scenarios.registry", fromlist=["REGISTRY"]).REGISTRY["commons"]
    ticks = {t.tick: t.state for t in store.ticks(run_id)}
    steps = store.steps(run_id)
    expected: dict[int, int] = {}
    for tick, state in ticks.items():
        taken = [(s.agent_id, s.action["harvest"]) for s in steps if s.tick == tick and "harvest" in s.action]
        limit = cls.usage_limit(store.get_run(run_id).spec["config"], state, len(taken))
        for aid, value in taken:
            expected[aid] = expected.get(aid, 0) + (value > limit + 1e-9)
    assert got["over_usage"].to_dict() == expected and got["usage_decisions"].sum() == sum(1 for s in steps if "harvest" in s.action)
    assert sum(expected.values()) > 0


def test_a_views_url_name_is_its_own_even_where_options_share_a_first_word():
    """Options sharing a first word each get a URL name of their own (the first word once named the last of them, so
    a link opened another chart); a lone first word stays the short name; every name maps back to its option."""
    from app_pages.common import url_slugs

    options = ["reward mean", "reward gini", "stock", "x y", "x  y", ""]
    named = url_slugs(options)
    assert named["stock"] == "stock" and named["reward mean"] == "reward-mean" and named["reward gini"] == "reward-gini"
    assert len(set(named.values())) == len(options) and all(named.values())
    assert url_slugs(["Graph", "Degree distribution"]) == {"Graph": "graph", "Degree distribution": "degree"}


def test_a_views_url_name_made_unique_is_no_other_options_name():
    """A name given a suffix to be unique is still no other option's name ("q" and "Q" share "q"; "q-3" is taken by an
    option of that name), so every link opens its own view."""
    from app_pages.common import url_slugs

    for options in (["q-3", "q", "Q"], ["a-2", "A", "a"], ["x y", "x-y", "X Y", "x-y-3"]):
        named = url_slugs(options)
        assert len(set(named.values())) == len(options), named
