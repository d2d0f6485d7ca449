"""Network: the follow graph (follow/unfollow events or a state field) or the interaction graph
(every event with an actor and a target) at a chosen tick; nodes sized by degree, coloured by
opinion when agents' actions carry one, else by payoff; the network metrics beside it."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis import network as net
from app_pages import charts
from app_pages.common import choose_run, page, q, tick_picker

MAX_DRAWN = 300


@st.cache_data(show_spinner=False, max_entries=32)
def _graph_view(edges: pd.DataFrame, max_nodes: int, seed: int) -> tuple[dict, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    g = net.build_graph(edges)
    metrics = net.network_metrics(g, seed=seed)
    drawn = net.sample(g, max_nodes)
    nodes, segs = net.layout(drawn, seed=seed)
    return metrics, nodes, segs, net.degree_frame(g)


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    st.title(f"Network of run {run['run_id']}")
    tick = tick_picker(run, "Graph at tick")
    if tick is None:
        return
    follows = q("follow_edges", run, run["run_id"], tick)
    kinds = ["follow graph"] if follows is not None else []
    kinds.append("interactions")
    c1, c2, c3 = st.columns(3)
    kind = c1.radio("Graph", kinds, horizontal=True)
    cumulative = c2.toggle("Interactions up to this tick", value=True, disabled=kind != "interactions",
                           help="off: only this tick's interactions")
    max_nodes = c3.slider("Nodes drawn (highest degree)", 20, 1000, MAX_DRAWN, step=20)
    if kind == "follow graph":
        edges = follows
    else:
        edges = q("interaction_edges", run, run["run_id"], tick, cumulative=cumulative)
    if edges is None or edges.empty:
        kinds_df = q("event_kinds", run, run["run_id"])
        st.info(f"No {'follows' if kind == 'follow graph' else 'interactions between agents'} up to tick {tick}. "
                "Interactions are events with an actor and a target (messages to someone, sanctions, trades, imitation); "
                f"this run's event kinds: {', '.join(kinds_df['kind']) or 'none'}.")
        return
    metrics, nodes, segs, degrees = _graph_view(edges, max_nodes, int(run["seed"]))
    values = q("node_values", run, run["run_id"], tick, tuple(nodes["agent_id"].tolist()))
    nodes = nodes.merge(values, on="agent_id", how="left")
    has_opinion = "opinion" in nodes and nodes["opinion"].notna().any()
    color, title = ("opinion", "opinion") if has_opinion else ("payoff_total", f"payoff to tick {tick}")
    nodes[color] = pd.to_numeric(nodes[color], errors="coerce")

    left, right = st.columns([3, 1])
    with left:
        drawn = f"{len(nodes)} nodes"
        if len(nodes) < metrics["nodes"]:
            drawn = f"{len(nodes)} of {metrics['nodes']} nodes (highest degree)"
        st.caption(f"{kind} at tick {tick}: {drawn}, {len(segs)} edges drawn; size = degree, colour = {title}"
                   + (" (grey: none known yet)" if nodes[color].isna().any() else ""))
        st.altair_chart(charts.network(nodes, segs, color=color, color_title=title, diverging=has_opinion), width="stretch")
    with right:
        st.subheader("Network metrics")
        for k, v in metrics.items():
            st.metric(k.replace("_", " "), f"{v:.3g}" if isinstance(v, float) else v)
        st.caption("hub inequality = Gini of in-degrees; clustering of the undirected graph "
                   f"(estimated from samples above {net.EXACT_CLUSTERING_MAX} nodes)")
    st.altair_chart(charts.degree_distribution(degrees.groupby("degree").size().reset_index(name="agents")), width="stretch")


page(render)
