"""The app's data layer without Streamlit: read-only queries, graphs, comparisons, the launch form."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from sqlmodel import Session

from analysis import compare as cmp
from runner import launcher
from analysis import network as net
from sim.store import queries
from scenarios import REGISTRY
from runner.config import build_spec
from sim.core.errors import UsageError
from runner.execution import execute
from sim.store.store import Store
from sim.store.tables import EventRow


def test_open_reader_never_creates_a_database(tmp_path):
    """Looking at a store that does not exist returns None and leaves no file behind."""
    path = tmp_path / "nothing.db"
    assert queries.open_reader(f"sqlite:///{path}") is None
    assert not path.exists()
    with pytest.raises(UsageError, match="cannot open database"):
        queries.open_reader("nosuchdriver://x")


def test_queries_aggregate_a_run_in_sql(store, db_url):
    """Per-tick agent stats equal the stored steps; tick frame holds metrics and numeric state."""
    rid = execute(build_spec("commons", ticks=3, sets=["strategy=random"], seed=5), store).run_id
    eng = queries.open_reader(db_url)
    stats = queries.agent_tick_stats(eng, rid)
    steps = store.steps(rid)
    for _, row in stats.iterrows():
        mine = [s.payoff for s in steps if s.tick == row["tick"]]
        assert row["agents"] == len(mine) and math.isclose(row["payoff_mean"], sum(mine) / len(mine))
        assert row["payoff_max"] == max(mine)
    frame = queries.tick_frame(eng, rid)
    assert frame["tick"].tolist() == [1, 2, 3]
    assert frame["stock"].tolist() == [t.metrics["stock"] for t in store.ticks(rid)]
    assert "state.stock" in frame
    runs = queries.list_runs(eng)
    assert runs.loc[0, "run_id"] == rid and runs.loc[0, "m.survival_time"] == 3
    assert queries.get_run(eng, "nope") is None


def test_tick_frame_thins_long_runs_but_keeps_the_last_tick(store, db_url):
    """Beyond max_points ticks only every k-th tick (and the last) is read."""
    rid = execute(build_spec("commons", ticks=25), store).run_id
    frame = queries.tick_frame(queries.open_reader(db_url), rid, max_points=10)
    assert len(frame) <= 11 and frame["tick"].iloc[-1] == 25 and frame["tick"].is_monotonic_increasing


def _events(store: Store, run_id: str, rows: list[tuple[int, str, int, int]]) -> None:
    with Session(store.engine) as s:
        for tick, kind, actor, target in rows:
            data = {"text": f"{kind} {actor}"} if kind == "comment" else {}
            s.add(EventRow(run_id=run_id, tick=tick, kind=kind, actor=actor, target=target, data=data))
        s.commit()


def test_follow_graph_replays_follows_and_unfollows(store, db_url):
    """The follow graph at tick t has the follows not undone by a later unfollow up to t."""
    rid = execute(build_spec("commons", ticks=3), store).run_id
    _events(store, rid, [(1, "follow", 0, 1), (1, "follow", 2, 1), (2, "unfollow", 0, 1), (3, "follow", 0, 1),
                         (2, "comment", 3, 2)])
    eng = queries.open_reader(db_url)
    edges = lambda t: sorted(map(tuple, queries.follow_edges(eng, rid, t)[["source", "target"]].values.tolist()))  # noqa: E731
    assert edges(1) == [(0, 1), (2, 1)]
    assert edges(2) == [(2, 1)]
    assert edges(3) == [(0, 1), (2, 1)]
    inter = queries.interaction_edges(eng, rid, 3)
    assert inter[["source", "target"]].values.tolist() == [[3, 2]]  # follows are not interactions
    said = queries.conversation(eng, rid, (2, 2))
    assert said["text"].tolist() == ["comment 3"]


def test_follow_graph_is_none_without_follows(store, db_url):
    rid = execute(build_spec("commons", ticks=2), store).run_id
    assert queries.follow_edges(queries.open_reader(db_url), rid, 2) is None


def test_network_metrics_and_sample():
    """Reciprocity, hub inequality and the top-degree sample on a small known graph."""
    edges = pd.DataFrame({"source": [0, 1, 2, 3, 4], "target": [1, 0, 0, 0, 0], "weight": 1})
    g = net.build_graph(edges)
    m = net.network_metrics(g)
    assert m["nodes"] == 5 and m["edges"] == 5
    assert math.isclose(m["reciprocity"], 2 / 5)
    assert m["max_in_degree"] == 4 and m["hub_inequality"] > 0.5
    sub = net.sample(g, 2)
    assert set(sub.nodes) == {0, 1}
    nodes, segs = net.layout(sub)
    assert len(nodes) == 2 and len(segs) == 2


def test_kaplan_meier_and_mean_ci():
    """KM steps down at each collapse time among those at risk; censored runs only leave the risk set; the curve
    goes on to the last censoring time (the horizon), not only to the last collapse."""
    km = cmp.kaplan_meier([2, 2, 5, 12, 12], [True, False, True, False, False])
    assert km["survival"].tolist() == pytest.approx([1.0, 0.8, 0.8 * (1 - 1 / 3), 0.8 * (1 - 1 / 3)])
    assert km["time"].tolist() == [0.0, 2.0, 5.0, 12.0]
    ci = cmp.mean_ci([1.0, 2.0, 3.0])
    assert ci["mean"] == 2.0 and 1.0 <= ci["lo"] < 2.0 < ci["hi"] <= 3.0 and ci["n"] == 3
    assert cmp.mean_ci([None, float("nan")])["n"] == 0


def test_config_labels_name_what_differs():
    runs = pd.DataFrame({"scenario": ["commons"] * 3, "config": [{"a": 1, "b": 2}, {"a": 1, "b": 3}, {"a": 1, "b": 2}]})
    assert cmp.config_labels(runs).tolist() == ["b=2", "b=3", "b=2"]


@pytest.mark.parametrize("scenario", sorted(REGISTRY))
def test_form_fields_cover_every_config_field_and_round_trip(scenario):
    """Every Config field becomes a widget; the defaults entered back validate into the default config."""
    cls = REGISTRY[scenario]
    fields = launcher.form_fields(cls.Config)
    assert [f.name for f in fields] == list(cls.Config.model_fields)
    for f in fields:
        if f.kind in ("int", "float") and f.lo is not None:
            assert f.default >= f.lo
    data = launcher.config_from_form(fields, {})
    assert cls.Config.model_validate(data) == cls.Config()


def test_launch_refuses_bad_input_before_starting(tmp_path):
    """An invalid field is a UsageError naming it; no process starts, no store is written."""
    with pytest.raises(UsageError, match="months"):
        launcher.launch("commons", {"months": 0}, seed=0, policy="scripted", db_url=f"sqlite:///{tmp_path / 'x.db'}")
    assert not (tmp_path / "x.db").exists()


def test_node_opinions_come_from_actions_else_from_own_events(store, db_url):
    """An `opinion` in an agent's actions wins; else the latest `stance` of the events it made; else none."""
    rid = execute(build_spec("commons", ticks=2, sets=["fishers=3"]), store).run_id
    with Session(store.engine) as s:
        s.add(EventRow(run_id=rid, tick=1, kind="post", actor=1, target=None, data={"text": "a", "stance": 0.2}))
        s.add(EventRow(run_id=rid, tick=2, kind="post", actor=1, target=None, data={"text": "b", "stance": 0.7}))
        s.commit()
    values = queries.node_values(queries.open_reader(db_url), rid, 2, (1, 2, 3)).set_index("agent_id")
    assert values.loc[1, "opinion"] == 0.7
    assert pd.isna(values.loc[2, "opinion"])
    assert values.loc[3, "payoff_total"] == sum(st.payoff for st in store.steps(rid) if st.agent_id == 3) > 0


def test_reciprocity_is_networkx_overall_reciprocity_self_loops_included():
    """The fast count of returned edges equals networkx's overall reciprocity, self-loops (never returned) included."""
    import random

    import networkx as nx

    for seed in range(4):
        g = nx.gnp_random_graph(150, 0.04, directed=True, seed=seed)
        rng = random.Random(seed)
        for _ in range(15):
            v = rng.randrange(150)
            g.add_edge(v, v)
        assert net.reciprocity(g) == pytest.approx(nx.reciprocity(g), abs=1e-12)
    assert net.reciprocity(nx.DiGraph()) == 0.0
