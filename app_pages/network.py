"""Network: the follow graph (the run's seeded graph changed by its follow/unfollow events, or a state field) or
the interaction graph (every event with an actor and a target) at the replay cursor's tick; edges point from
source to target; nodes sized by degree, coloured by opinion or payoff, or by role where agents have different
roles (a market's customers and businesses), or, in its place, the degree distribution; the network metrics of the
whole graph beside either."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from analysis import network as net
from app_pages import charts, export
from app_pages.common import choose_run, noun, one_of, page, q, tick_picker

MAX_DRAWN = 300


@st.cache_data(show_spinner=False, max_entries=32)
def _graph_view(edges: pd.DataFrame, max_nodes: int, seed: int) -> tuple[dict, pd.DataFrame, pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    g = net.build_graph(edges)
    metrics = net.network_metrics(g, seed=seed)
    drawn = net.sample(g, max_nodes)
    nodes, segs = net.layout(drawn, seed=seed)
    return metrics, nodes, segs, net.arrowheads(segs), net.degree_frame(g)


def render(table: pd.DataFrame) -> None:
    run = choose_run(table)
    st.title(f"Network of run {run['run_id']}")
    unit = noun(run["scenario"])
    tick = tick_picker(run, f"Graph after {unit}")
    if tick is None:
        return
    follows = q("follow_edges", run, run["run_id"], tick)
    stored_start = q("has_initial", run, run["run_id"])
    kinds = ["follow graph"] if follows is not None else []
    kinds.append("interactions")
    c1, c2, c3 = st.columns(3)
    kind = c1.radio("Graph", kinds, horizontal=True)
    cumulative = c2.toggle(f"Interactions up to this {unit}", value=True, disabled=kind != "interactions",
                           help=f"off: only this {unit}'s interactions")
    max_nodes = c3.slider("Nodes drawn (highest degree)", 20, 1000, MAX_DRAWN, step=20)
    if kind == "follow graph":
        edges = follows
        if not stored_start:
            st.warning("This run was stored before runs kept their seeded follow graph: only the follows made during "
                       "the run are drawn, so edges and reciprocity here are not the run's own.")
    else:
        edges = q("interaction_edges", run, run["run_id"], tick, cumulative=cumulative)
        if not stored_start and follows is None:
            st.caption("This run was stored before runs kept what they start from: a graph its scenario seeded (the "
                       "social scenario's follows) cannot be drawn for it; its interactions can.")
    if edges is None or edges.empty:
        kinds_df = q("event_kinds", run, run["run_id"])
        st.info(f"No {'follows' if kind == 'follow graph' else 'interactions between agents'} up to {unit} {tick}. "
                "Interactions are events with an actor and a target (messages to someone, sanctions, trades, imitation); "
                f"this run's event kinds: {', '.join(kinds_df['kind']) or 'none'}.")
        return
    metrics, nodes, segs, arrows, degrees = _graph_view(edges, max_nodes, int(run["seed"]))
    drawn_ids = tuple(nodes["agent_id"].tolist())
    values = q("node_values", run, run["run_id"], tick, drawn_ids, payoffs=False)
    if not values["opinion"].notna().any():  # no opinions: colour by payoff (summing every step of theirs)
        values = q("node_values", run, run["run_id"], tick, drawn_ids)
    nodes = nodes.merge(values, on="agent_id", how="left")
    nodes = nodes.merge(q("agent_roles", run, run["run_id"], drawn_ids), on="agent_id", how="left")
    nodes["role"] = nodes["role"].fillna("agent")
    nodes["label"] = nodes["label"].fillna(nodes["agent_id"].map(lambda a: f"agent {a}"))
    by_role = nodes["role"].nunique() > 1
    has_opinion = "opinion" in nodes and nodes["opinion"].notna().any()
    color, title = ("opinion", "opinion") if has_opinion else ("payoff_total", f"payoff to {unit} {tick}")
    nodes[color] = pd.to_numeric(nodes[color], errors="coerce")

    view = _view()
    left, right = st.columns([3, 1])
    with left:
        if view == DEGREES:
            export.chart(charts.degree_distribution(degrees.groupby("degree").size().reset_index(name="agents")),
                         f"{run['run_id']}-degrees-t{tick}", key="network-degrees")
            st.caption(f"agents by degree (in + out) in the whole {kind} after {unit} {tick}, not only the nodes drawn")
        else:
            drawn = f"{len(nodes)} nodes"
            if len(nodes) < metrics["nodes"]:
                drawn = f"{len(nodes)} of {metrics['nodes']} nodes (highest degree)"
            colour = "role (shape too)" if by_role else title
            st.caption(f"{kind} after {unit} {tick}: {drawn}, {len(segs)} of {metrics['edges']} edges drawn, each pointing "
                       f"from source to target; size = degree, colour = {colour}"
                       + (" (grey: none known yet)" if not by_role and nodes[color].isna().any() else ""))
            figure = charts.network(nodes, segs, arrows, color=color, color_title=title, diverging=has_opinion, role=by_role)
            export.chart(figure, f"{run['run_id']}-network-t{tick}", key="network")
    with right:
        st.subheader("Network metrics")
        st.caption("of the whole graph, not only the nodes drawn")
        for k, v in metrics.items():
            st.metric(k.replace("_", " "), f"{v:.3g}" if isinstance(v, float) else v)
        if kind == "follow graph":
            ticks = q("tick_frame", run, run["run_id"])
            own = ticks.loc[ticks["tick"] == tick, "follow_edges"] if "follow_edges" in ticks else pd.Series(dtype=float)
            if len(own) and pd.notna(own.iloc[0]):
                same = int(own.iloc[0]) == metrics["edges"]
                st.caption(f"The run's own `follow_edges` after {unit} {tick}: {int(own.iloc[0])} "
                           + ("(the same graph)" if same else "(differs: see the note above)"))
        st.caption("hub inequality = Gini of in-degrees; clustering of the undirected graph "
                   f"(estimated from samples above {net.EXACT_CLUSTERING_MAX} nodes)")


#: what the page draws beside the metrics: the graph (first) or its degree distribution, one at a time (each chart
#: is drawn by the browser on the first view), in the URL as `?view=degree`
GRAPH, DEGREES, VIEW = "Graph", "Degree distribution", "network_view"


def _view() -> str:
    """The graph or its degree distribution (`one_of`; the graph first)."""
    return one_of("Show", [GRAPH, DEGREES], VIEW, url="view", label_visibility="collapsed") or GRAPH


page(render)
