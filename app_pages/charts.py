"""Altair charts the pages share; all with tooltips, all from small frames."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import pandas as pd


def lines(df: pd.DataFrame, columns: Sequence[str], *, x: str = "tick", title: str = "", independent: bool = False,
          height: int = 260) -> alt.Chart:
    """One line per column over `x` (long format inside), tooltips with the exact values."""
    cols = [c for c in columns if c in df]
    long = df[[x, *cols]].melt(id_vars=[x], var_name="series", value_name="value").dropna(subset=["value"])
    base = alt.Chart(long, title=title).encode(
        x=alt.X(f"{x}:Q", title=x, axis=alt.Axis(format="d", tickMinStep=1) if x == "tick" else alt.Axis()),
        y=alt.Y("value:Q", title=None, scale=alt.Scale(zero=False), axis=alt.Axis(format=".4~g")),
        color=alt.Color("series:N", legend=alt.Legend(orient="bottom", columns=3, labelLimit=260)),
        tooltip=[alt.Tooltip(f"{x}:Q"), "series:N", alt.Tooltip("value:Q", format=".4g")],
    )
    chart = base.mark_line(point=len(df) <= 60).properties(height=height)
    if independent and len(cols) > 1:
        chart = base.mark_line(point=len(df) <= 60).properties(height=140, width=280).facet(
            facet=alt.Facet("series:N", title=None), columns=3).resolve_scale(y="independent")
    return chart.interactive() if not (independent and len(cols) > 1) else chart


def band(df: pd.DataFrame, *, x: str, mid: str, lo: str, hi: str, title: str = "") -> alt.Chart:
    """A mean line with a min-max band."""
    base = alt.Chart(df, title=title).encode(x=alt.X(f"{x}:Q"))
    area = base.mark_area(opacity=0.25).encode(y=alt.Y(f"{lo}:Q", title=None), y2=f"{hi}:Q")
    line = base.mark_line().encode(y=f"{mid}:Q", tooltip=[x, alt.Tooltip(mid, format=".4g"), alt.Tooltip(lo, format=".4g"),
                                                           alt.Tooltip(hi, format=".4g")])
    return (area + line).properties(height=240)


def histogram(df: pd.DataFrame, column: str, title: str = "") -> alt.Chart:
    return alt.Chart(df, title=title).mark_bar().encode(
        x=alt.X(f"{column}:Q", bin=alt.Bin(maxbins=30)), y="count()", tooltip=["count()"]).properties(height=220)


def stacked_counts(df: pd.DataFrame, *, x: str, color: str, y: str = "count", title: str = "") -> alt.Chart:
    return alt.Chart(df, title=title).mark_bar().encode(
        x=alt.X(f"{x}:O"), y=alt.Y(f"{y}:Q"), color=f"{color}:N", tooltip=[x, color, y]).properties(height=240)


def network(nodes: pd.DataFrame, edges: pd.DataFrame, arrows: pd.DataFrame, *, color: str, color_title: str,
            diverging: bool, role: bool = False) -> alt.Chart:
    """Edges as rules with an arrowhead at their target (direction: source -> target), nodes as circles sized by
    degree, coloured by `color` (numbers; grey where unknown) or, with `role`, by the agent's role with a shape
    each (a market's customers and businesses apart)."""
    axis = alt.Axis(labels=False, ticks=False, grid=False, title=None, domain=False)
    x, y = alt.X("x:Q", axis=axis), alt.Y("y:Q", axis=axis)
    e = alt.Chart(edges).mark_rule(opacity=0.3, color="#888").encode(
        x=x, y=y, x2="x2:Q", y2="y2:Q", tooltip=[alt.Tooltip("source:Q", title="from"), alt.Tooltip("target:Q", title="to"),
                                                 "weight:Q"])
    heads = alt.Chart(arrows).mark_point(shape="triangle-up", filled=True, size=45, opacity=0.55, color="#555").encode(
        x=x, y=y, angle=alt.Angle("angle:Q", scale=None), tooltip=[alt.Tooltip("source:Q", title="from"),
                                                                    alt.Tooltip("target:Q", title="to")])
    size = alt.Size("degree:Q", scale=alt.Scale(range=[30, 600]), legend=None)
    tips = [alt.Tooltip("label:N", title="agent"), "degree:Q"]
    if role:
        dots = alt.Chart(nodes).mark_point(filled=True, opacity=0.9, stroke="white", strokeWidth=0.5).encode(
            x=x, y=y, size=size, color=alt.Color("role:N", title="role", scale=alt.Scale(scheme="category10")),
            shape=alt.Shape("role:N", title="role"), tooltip=[*tips, "role:N"])
        return alt.layer(e, heads, dots).properties(height=520).configure_view(strokeWidth=0)
    values = pd.to_numeric(nodes[color], errors="coerce")
    if diverging:  # opinions: centred on 0 for [-1, 1], on 0.5 for [0, 1]
        mid = 0.0 if values.min() < 0 else (0.5 if values.max() <= 1 else float(values.median()))
        scale = alt.Scale(scheme="redblue", domainMid=mid)
    else:
        scale = alt.Scale(scheme="viridis")
    known = alt.Chart(nodes[values.notna()]).mark_circle(opacity=0.9, stroke="white", strokeWidth=0.5).encode(
        x=x, y=y, size=size, color=alt.Color(f"{color}:Q", title=color_title, scale=scale),
        tooltip=[*tips, alt.Tooltip(f"{color}:Q", format=".3g")])
    unknown = alt.Chart(nodes[values.isna()]).mark_circle(opacity=0.6, color="#bbb").encode(x=x, y=y, size=size, tooltip=tips)
    layers = [e, heads, unknown, known] if values.isna().any() else [e, heads, known]
    return alt.layer(*layers).properties(height=520).configure_view(strokeWidth=0)


def ci_points(df: pd.DataFrame, runs_long: pd.DataFrame, *, group: str = "group", title: str = "") -> alt.Chart:
    """One row per group: its runs' values as dots, the mean as a diamond, the 95% CI as an error bar."""
    y = alt.Y(f"{group}:N", title=None, axis=alt.Axis(labelLimit=420))
    dots = alt.Chart(runs_long).mark_circle(opacity=0.5, size=60).encode(
        y=y, x=alt.X("value:Q", title=None, scale=alt.Scale(zero=False)),
        tooltip=["run_id:N", alt.Tooltip("value:Q", format=".4g")])
    tips = ["n:Q", alt.Tooltip("mean:Q", format=".4g"), alt.Tooltip("lo:Q", format=".4g"), alt.Tooltip("hi:Q", format=".4g")]
    bars = alt.Chart(df).mark_errorbar(ticks=True, thickness=2, color="black").encode(y=y, x="lo:Q", x2="hi:Q", tooltip=tips)
    mean = alt.Chart(df).mark_point(shape="diamond", size=120, filled=True, color="black").encode(y=y, x="mean:Q", tooltip=tips)
    rows = max(1, int(df[group].nunique()))
    return (dots + bars + mean).properties(title=title, height=min(600, 40 + 32 * rows))


def survival_curves(curves: pd.DataFrame) -> alt.Chart:
    chart = alt.Chart(curves, title="Kaplan-Meier: share of runs not collapsed")
    return chart.mark_line(interpolate="step-after", point=True).encode(
        x=alt.X("time:Q", title="ticks survived"), y=alt.Y("survival:Q", scale=alt.Scale(domain=[0, 1]), title="S(t)"),
        color="group:N", tooltip=["group:N", "time:Q", alt.Tooltip("survival:Q", format=".3f"), "at_risk:Q", "collapsed:Q"],
    ).properties(height=280)


def trust(df: pd.DataFrame) -> alt.Chart:
    """Trust in each peer in [-1, 1], negative in red."""
    return alt.Chart(df, title="Trust in peers").mark_bar().encode(
        x=alt.X("peer:O"), y=alt.Y("trust:Q", scale=alt.Scale(domain=[-1, 1])),
        color=alt.condition("datum.trust >= 0", alt.value("#4c78a8"), alt.value("#e45756")),
        tooltip=["peer", "trust"]).properties(height=220)


def forks(frames: pd.DataFrame, metric: str, branch: float | None) -> alt.Chart:
    """A metric over ticks for a parent run and its forks, with the branch tick marked."""
    chart = alt.Chart(frames, title=f"{metric}: parent and forks").mark_line(point=True).encode(
        x="tick:Q", y=alt.Y(f"{metric}:Q", scale=alt.Scale(zero=False)), color="run:N", tooltip=["run", "tick", metric])
    if branch is not None:
        chart = chart + alt.Chart(pd.DataFrame({"tick": [branch]})).mark_rule(strokeDash=[4, 4]).encode(x="tick:Q")
    return chart.properties(height=300)


def degree_distribution(dist: pd.DataFrame) -> alt.Chart:
    """Agents per degree: one bar per degree when few, else binned."""
    x = alt.X("degree:O") if len(dist) <= 30 else alt.X("degree:Q", bin=alt.Bin(maxbins=40))
    return alt.Chart(dist, title="Degree distribution").mark_bar().encode(
        x=x, y=alt.Y("sum(agents):Q", title="agents"), tooltip=[alt.Tooltip("sum(agents):Q", title="agents")]).properties(height=200)


def per_agent(series: pd.DataFrame, column: str, *, title: str) -> alt.Chart:
    """One line per agent (labelled with who it is) of `column` over ticks; hovering a line names its agent."""
    pick = alt.selection_point(fields=["agent"], bind="legend", on="mouseover")
    return alt.Chart(series.dropna(subset=[column]), title=title).mark_line(point=len(series["tick"].unique()) <= 40).encode(
        x=alt.X("tick:Q", title="tick", axis=alt.Axis(format="d", tickMinStep=1)),
        y=alt.Y(f"{column}:Q", title=column, scale=alt.Scale(zero=False)),
        color=alt.Color("agent:N", legend=alt.Legend(orient="right", labelLimit=0, title=None, symbolLimit=0)),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.25)),
        tooltip=["agent:N", alt.Tooltip("tick:Q"), alt.Tooltip(f"{column}:Q", format=".4g")],
    ).add_params(pick).properties(height=360)


def metric(df: pd.DataFrame, column: str, *, unit: str = "", lines: Sequence[tuple[float, str]] = (), title: str = "",
           height: int = 220) -> alt.LayerChart:
    """One metric over ticks: integer tick axis, the unit on the y axis, numbers without trailing zeros (a constant
    series reads 5, not 5.000000), and the scenario's reference lines (e.g. the collapse threshold) as dashed rules."""
    data = df[["tick", column]].dropna()
    label = f"{column} ({unit})" if unit else column
    values = pd.to_numeric(data[column], errors="coerce")
    refs = pd.DataFrame([{"value": float(v), "line": name} for v, name in lines])
    lo = min([values.min(), *refs.get("value", [])]) if len(values) else 0
    hi = max([values.max(), *refs.get("value", [])]) if len(values) else 1
    pad = (hi - lo) * 0.05 or max(abs(hi) * 0.05, 0.5)
    y = alt.Y(f"{column}:Q", title=label, scale=alt.Scale(domain=[lo - pad, hi + pad], nice=False), axis=alt.Axis(format=".4~g"))
    line = alt.Chart(data, title=title or column).mark_line(point=len(data) <= 60).encode(
        x=alt.X("tick:Q", title="tick", axis=alt.Axis(format="d", tickMinStep=1)), y=y,
        tooltip=[alt.Tooltip("tick:Q"), alt.Tooltip(f"{column}:Q", format=".4~g", title=label)])
    layers: list[Any] = [line]
    if len(refs):
        rule = alt.Chart(refs).mark_rule(strokeDash=[5, 4], color="#c44").encode(
            y="value:Q", tooltip=["line:N", alt.Tooltip("value:Q", format=".4~g")])
        text = alt.Chart(refs).mark_text(align="left", dx=3, dy=-6, color="#c44", fontSize=11).encode(
            y="value:Q", x=alt.value(0), text="line:N")
        layers += [rule, text]
    return alt.layer(*layers).properties(height=height)


def norm_counts(timeline: pd.DataFrame, last_tick: int, colours: dict[str, str]) -> alt.Chart:
    """Norm events per tick, stacked by kind: every tick of the run on the axis (ticks without events stay, as gaps),
    each kind in its fixed colour."""
    ticks = max(last_tick, int(timeline["tick"].max()) if len(timeline) else 0)
    kinds = list(colours) + sorted(set(timeline["kind"]) - set(colours))
    palette = list(colours.values()) + ["#999"] * (len(kinds) - len(colours))
    return alt.Chart(timeline, title="Norm events per tick").mark_bar().encode(
        x=alt.X("tick:O", scale=alt.Scale(domain=list(range(1, ticks + 1))), axis=alt.Axis(labelOverlap=True, labelAngle=0)),
        y=alt.Y("count:Q", stack="zero"), color=alt.Color("kind:N", scale=alt.Scale(domain=kinds, range=palette)),
        tooltip=["tick:Q", "kind:N", "count:Q"]).properties(height=240)
