"""Altair charts the pages share; all with tooltips, all from small frames.

Every chart names its fields through `field` (a column such as `state.stock` is one field, not a nested path),
formats numbers without trailing zeros (`NUMBER`), draws ticks as whole numbers named by the scenario's unit of
time (`noun`: month, round, step), and gives each series its own colour (`palette`: up to 20 colours, then a dash
pattern too) with a legend that lists every series.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import altair as alt
import pandas as pd

#: numbers on axes and in tooltips: four significant digits, no trailing zeros (5, 9.5, 0.1234, 1.2e+04)
NUMBER = ".4~g"
#: 20 colours that stay apart (Tableau's), then the same again with a dash pattern
COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d", "#bab0ac", "#eeca3b",
           "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79"]
DASHES = [[1, 0], [6, 3], [2, 2], [8, 3, 2, 3], [1, 3]]


def field(name: str) -> str:
    """A column name as a Vega-Lite field: dots and brackets escaped, so `state.stock` is that column, not the
    `stock` of a nested `state` (which the data does not have: the chart would be blank)."""
    return name.replace("\\", "\\\\").replace(".", "\\.").replace("[", "\\[").replace("]", "\\]")


def tick_axis(noun: str = "tick", **kwargs: Any) -> alt.X:
    """The x axis of ticks: whole numbers only, titled by the scenario's unit of time."""
    return alt.X("tick:Q", title=noun, axis=alt.Axis(format="d", tickMinStep=1), **kwargs)


def value_axis(values: Any, **kwargs: Any) -> alt.Axis:
    """A value axis in `NUMBER` format; whole-number ticks when every value is whole (a count of fishers, months
    survived, tons of an integer catch read 1, 2, not 0.6, 0.8, 1.2)."""
    numbers = pd.to_numeric(pd.Series(values, dtype=object), errors="coerce").dropna().astype(float)
    whole = len(numbers) > 0 and bool((numbers == numbers.round()).all())
    return alt.Axis(format=NUMBER, **({"tickMinStep": 1} if whole else {}), **kwargs)


def titled(name: str, unit: str = "") -> str:
    """`name (unit)`, or `name` without a unit."""
    return f"{name} ({unit})" if unit else name


def palette(order: Sequence[Any]) -> tuple[list[str], list[list[int]]]:
    """A colour and a dash pattern for each of `order`: no two series share both (20 colours x 5 patterns)."""
    colours = [COLOURS[i % len(COLOURS)] for i in range(len(order))]
    dashes = [DASHES[(i // len(COLOURS)) % len(DASHES)] for i in range(len(order))]
    return colours, dashes


def legend(n: int, title: Optional[str] = None, symbol: str = "stroke") -> alt.Legend:
    """A legend that shows every one of `n` entries (no symbol limit, labels uncut): beside the plot for a few, under
    it in columns for many; its symbols drawn solid (`symbol`: a stroke for lines, a square for bars), not as faint
    as a band drawn under the lines."""
    look = dict(symbolType=symbol, symbolOpacity=1, symbolStrokeWidth=3 if symbol == "stroke" else 1)
    if n <= 8:
        return alt.Legend(title=title, labelLimit=0, symbolLimit=0, orient="right", **look)
    return alt.Legend(title=title, labelLimit=280, symbolLimit=0, orient="bottom", columns=min(4, max(2, n // 8)),
                      direction="vertical", **look)


def series_colour(name: str, order: Sequence[Any], title: Optional[str] = None, symbol: str = "stroke") -> dict[str, Any]:
    """Encodings that tell `order`'s series of column `name` apart: a colour each and, past 20, a dash pattern."""
    colours, dashes = palette(order)
    out: dict[str, Any] = {"color": alt.Color(f"{field(name)}:N", title=title, sort=list(order),
                                              scale=alt.Scale(domain=list(order), range=colours),
                                              legend=legend(len(order), title, symbol))}
    if len(order) > len(COLOURS):
        out["strokeDash"] = alt.StrokeDash(f"{field(name)}:N", sort=list(order), legend=None,
                                           scale=alt.Scale(domain=list(order), range=dashes))
    return out


def lines(df: pd.DataFrame, columns: Sequence[str], *, x: str = "tick", title: str = "", unit: str = "",
          noun: str = "tick", height: int = 260) -> alt.Chart:
    """One line per column over `x` (long format inside), tooltips with the exact values."""
    cols = [c for c in columns if c in df]
    long = df[[x, *cols]].melt(id_vars=[x], var_name="series", value_name="value").dropna(subset=["value"])
    x_enc = tick_axis(noun) if x == "tick" else alt.X(f"{field(x)}:Q", title=x)
    chart = alt.Chart(long, title=title).mark_line(point=len(df) <= 60).encode(
        x=x_enc, y=alt.Y("value:Q", title=unit or None, scale=alt.Scale(zero=False), axis=value_axis(long["value"])),
        tooltip=[alt.Tooltip(f"{field(x)}:Q", title=noun if x == "tick" else x), "series:N",
                 alt.Tooltip("value:Q", format=NUMBER, title=unit or "value")],
        **series_colour("series", cols))
    return chart.properties(height=height)


def band(df: pd.DataFrame, *, mid: str, lo: str, hi: str, title: str = "", unit: str = "", noun: str = "tick",
         what: str = "payoff") -> alt.LayerChart:
    """A mean line with a min-max band over ticks, both named in the legend."""
    long = pd.concat([df[["tick", mid]].rename(columns={mid: "value"}).assign(series=f"mean {what}"),
                      df[["tick", lo, hi]].rename(columns={lo: "lo", hi: "hi"}).assign(series="min-max over agents")])
    order = [f"mean {what}", "min-max over agents"]
    colour = alt.Color("series:N", title=None, sort=order, scale=alt.Scale(domain=order, range=["#4c78a8", "#9ecae9"]),
                       legend=legend(2, symbol="square"))
    y_title = titled(what, unit)
    base = alt.Chart(title=title).encode(x=tick_axis(noun))  # (the rows are the layer's: `metric` says why)
    area = base.transform_filter("isValid(datum.lo)").mark_area(opacity=0.35).encode(
        y=alt.Y("lo:Q", title=y_title, axis=alt.Axis(format=NUMBER), scale=alt.Scale(zero=False)), y2="hi:Q",
        color=colour, tooltip=[alt.Tooltip("tick:Q", title=noun), alt.Tooltip("lo:Q", format=NUMBER, title="min"),
                               alt.Tooltip("hi:Q", format=NUMBER, title="max")])
    line = base.transform_filter("isValid(datum.value)").mark_line(point=len(df) <= 60).encode(
        y=alt.Y("value:Q", title=y_title, axis=alt.Axis(format=NUMBER)), color=colour,
        tooltip=[alt.Tooltip("tick:Q", title=noun), alt.Tooltip("value:Q", format=NUMBER, title=f"mean {what}")])
    return alt.layer(area, line, data=long).properties(height=240)


def histogram(df: pd.DataFrame, column: str, *, title: str = "", unit: str = "", counted: str = "agents") -> alt.Chart:
    """How many `counted` (agents) have each value of `column`, in up to 30 bins."""
    return alt.Chart(df, title=title).mark_bar().encode(
        x=alt.X(f"{field(column)}:Q", bin=alt.Bin(maxbins=30), title=titled(column, unit), axis=alt.Axis(format=NUMBER)),
        y=alt.Y("count():Q", title=counted, axis=alt.Axis(format="d", tickMinStep=1)),
        tooltip=[alt.Tooltip("count():Q", title=counted)]).properties(height=220)


def stacked_counts(df: pd.DataFrame, *, x: str, color: str, y: str = "count", title: str = "", noun: str = "tick",
                   counted: str = "count") -> alt.Chart:
    order = sorted(df[color].astype(str).unique()) if len(df) else []
    return alt.Chart(df, title=title).mark_bar().encode(
        x=alt.X(f"{field(x)}:O", title=noun if x == "tick" else x, axis=alt.Axis(labelOverlap=True, labelAngle=0)),
        y=alt.Y(f"{field(y)}:Q", title=counted, axis=alt.Axis(format="d", tickMinStep=1)),
        tooltip=[alt.Tooltip(f"{field(x)}:O", title=noun if x == "tick" else x), f"{field(color)}:N", f"{field(y)}:Q"],
        **series_colour(color, order, symbol="square")).properties(height=240)


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
        x=x, y=y, size=size, color=alt.Color(f"{field(color)}:Q", title=color_title, scale=scale,
                                             legend=alt.Legend(format=NUMBER)),
        tooltip=[*tips, alt.Tooltip(f"{field(color)}:Q", format=NUMBER, title=color_title)])
    unknown = alt.Chart(nodes[values.isna()]).mark_circle(opacity=0.6, color="#bbb").encode(x=x, y=y, size=size, tooltip=tips)
    layers = [e, heads, unknown, known] if values.isna().any() else [e, heads, known]
    return alt.layer(*layers).properties(height=520).configure_view(strokeWidth=0)


def trust(df: pd.DataFrame) -> alt.Chart:
    """Trust in each peer in [-1, 1], negative in red."""
    return alt.Chart(df, title="Trust in peers").mark_bar().encode(
        x=alt.X("peer:O", title="peer (agent id)", sort=sorted(df["peer"].tolist())),
        y=alt.Y("trust:Q", scale=alt.Scale(domain=[-1, 1]), axis=alt.Axis(format=NUMBER)),
        color=alt.condition("datum.trust >= 0", alt.value("#4c78a8"), alt.value("#e45756")),
        tooltip=["peer:O", alt.Tooltip("trust:Q", format=NUMBER)]).properties(height=220)


def forks(frames: pd.DataFrame, metric: str, branch: Optional[float], *, unit: str = "", noun: str = "tick") -> alt.LayerChart:
    """A metric over ticks for a parent run and its forks (parent first, in one fixed colour), with the branch tick
    marked."""
    order = sorted(frames["run"].unique(), key=lambda r: (not str(r).startswith("parent"), str(r)))
    label = titled(metric, unit)
    chart = alt.Chart(frames, title=f"{metric}: parent and forks").mark_line(point=True).encode(
        x=tick_axis(noun), y=alt.Y(f"{field(metric)}:Q", title=label, scale=alt.Scale(zero=False), axis=alt.Axis(format=NUMBER)),
        tooltip=["run:N", alt.Tooltip("tick:Q", title=noun), alt.Tooltip(f"{field(metric)}:Q", format=NUMBER, title=label)],
        **series_colour("run", order, title="run"))
    layers: list[Any] = [chart]
    if branch is not None:
        marks = pd.DataFrame({"tick": [branch], "label": [f"branch: {noun} {int(branch)}"]})
        layers += [alt.Chart(marks).mark_rule(strokeDash=[4, 4], color="#555").encode(x="tick:Q", tooltip=["label:N"]),
                   alt.Chart(marks).mark_text(align="left", dx=4, dy=-6, color="#555", fontSize=11).encode(
                       x="tick:Q", y=alt.value(0), text="label:N")]
    return alt.layer(*layers).properties(height=300)


def degree_distribution(dist: pd.DataFrame) -> alt.Chart:
    """Agents per degree on a linear degree axis (one bar a degree when few, binned when many), so the gaps
    between degrees show and the shape is the distribution's."""
    degrees = pd.to_numeric(dist["degree"])
    if degrees.nunique() <= 60 and degrees.max() - degrees.min() <= 120:
        data = dist.assign(left=degrees - 0.4, right=degrees + 0.4)
        return alt.Chart(data, title="Degree distribution").mark_bar().encode(
            x=alt.X("left:Q", title="degree (in + out)", axis=alt.Axis(format="d", tickMinStep=1),
                    scale=alt.Scale(domain=[float(degrees.min()) - 1, float(degrees.max()) + 1], nice=False)),
            x2="right:Q", y=alt.Y("agents:Q", title="agents", axis=alt.Axis(format="d", tickMinStep=1)), y2=alt.datum(0),
            tooltip=[alt.Tooltip("degree:Q", title="degree"), alt.Tooltip("agents:Q", title="agents")]).properties(height=200)
    return alt.Chart(dist, title="Degree distribution").mark_bar().encode(
        x=alt.X("degree:Q", bin=alt.Bin(maxbins=40), title="degree (in + out)", axis=alt.Axis(format="d")),
        y=alt.Y("sum(agents):Q", title="agents", axis=alt.Axis(format="d", tickMinStep=1)),
        tooltip=[alt.Tooltip("sum(agents):Q", title="agents")]).properties(height=200)


def per_agent(series: pd.DataFrame, column: str, *, title: str, unit: str = "", noun: str = "tick",
              order: Optional[Sequence[str]] = None, label: Optional[str] = None) -> alt.Chart:
    """One line per agent (labelled with who it is, in agent-id order) of `column` over ticks; hovering a legend
    entry brings its agent forward."""
    data = series.dropna(subset=[column])
    agents = list(order) if order is not None else sorted(data["agent"].unique())
    pick = alt.selection_point(fields=["agent"], bind="legend", on="mouseover")
    label = titled(label or column, unit)
    return alt.Chart(data, title=title).mark_line(point=len(data["tick"].unique()) <= 40).encode(
        x=tick_axis(noun),
        y=alt.Y(f"{field(column)}:Q", title=label, scale=alt.Scale(zero=False), axis=value_axis(data[column])),
        opacity=alt.condition(pick, alt.value(1.0), alt.value(0.25)),
        tooltip=["agent:N", alt.Tooltip("tick:Q", title=noun), alt.Tooltip(f"{field(column)}:Q", format=NUMBER, title=label)],
        **series_colour("agent", agents),
    ).add_params(pick).properties(height=360)


def metric(df: pd.DataFrame, column: str, *, unit: str = "", lines: Sequence[tuple[float, str]] = (), title: str = "",
           height: int = 220, noun: str = "tick", select: Optional[str] = None) -> alt.LayerChart:
    """One metric over ticks: integer tick axis named by the scenario's unit of time, the unit on the y axis, numbers
    without trailing zeros (a constant series reads 5, not 5.000000), and the scenario's reference lines (e.g. the
    collapse threshold) as dashed rules. `select`: the name of a click selection on the points (the page opens that
    tick)."""
    data = df[["tick", column]].dropna()
    label = titled(column, unit)
    values = pd.to_numeric(data[column], errors="coerce")
    refs = pd.DataFrame([{"value": float(v), "line": name} for v, name in lines])
    lo = min([values.min(), *refs.get("value", [])]) if len(values) else 0
    hi = max([values.max(), *refs.get("value", [])]) if len(values) else 1
    pad = (hi - lo) * 0.05 or max(abs(hi) * 0.05, 0.5)
    y = alt.Y(f"{field(column)}:Q", title=label, scale=alt.Scale(domain=[lo - pad, hi + pad], nice=False),
              axis=value_axis(values))
    tips = [alt.Tooltip("tick:Q", title=noun), alt.Tooltip(f"{field(column)}:Q", format=NUMBER, title=label)]
    # (the rows are given once, to the layer: layers that each held the same frame made Altair hash each one's
    # printed frame, a tenth of a Run page's server time)
    line = alt.Chart(title=title or column).mark_line(point=len(data) <= 60 and select is None).encode(
        x=tick_axis(noun), y=y, tooltip=tips)
    layers: list[Any] = [line]
    if select is not None:  # the points a click picks (the tick's conversation and prompts open below)
        pick = alt.selection_point(name=select, fields=["tick"], on="click", nearest=True)
        layers.append(alt.Chart().mark_point(filled=True, size=70, cursor="pointer").encode(
            x=tick_axis(noun), y=y, tooltip=tips, opacity=alt.condition(pick, alt.value(1.0), alt.value(0.55))).add_params(pick))
    if len(refs):
        rule = alt.Chart(refs).mark_rule(strokeDash=[5, 4], color="#c44").encode(
            y="value:Q", tooltip=["line:N", alt.Tooltip("value:Q", format=NUMBER)])
        text = alt.Chart(refs).mark_text(align="left", dx=3, dy=-6, color="#c44", fontSize=11).encode(
            y="value:Q", x=alt.value(0), text="line:N")
        layers += [rule, text]
    return alt.layer(*layers, data=data).properties(height=height)


def norm_counts(timeline: pd.DataFrame, last_tick: int, colours: Mapping[str, str], noun: str = "tick") -> alt.Chart:
    """Norm events per tick, stacked by kind: every tick of the run on the axis (ticks without events stay, as gaps),
    each kind in its fixed colour."""
    ticks = max(last_tick, int(timeline["tick"].max()) if len(timeline) else 0)
    kinds = list(colours) + sorted(set(timeline["kind"]) - set(colours))
    palette_ = list(colours.values()) + ["#999"] * (len(kinds) - len(colours))
    return alt.Chart(timeline, title=f"Norm events per {noun}").mark_bar().encode(
        x=alt.X("tick:O", title=noun, scale=alt.Scale(domain=list(range(1, ticks + 1))),
                axis=alt.Axis(labelOverlap=True, labelAngle=0)),
        y=alt.Y("count:Q", stack="zero", title="events", axis=alt.Axis(format="d", tickMinStep=1)),
        color=alt.Color("kind:N", scale=alt.Scale(domain=kinds, range=palette_), legend=legend(len(kinds), symbol="square")),
        tooltip=[alt.Tooltip("tick:Q", title=noun), "kind:N", "count:Q"]).properties(height=240)


def scores(frame: pd.DataFrame, columns: Sequence[str], *, title: str, unit: str = "") -> alt.Chart:
    """Policy synthesis: each episode's scores over iterations (whole iterations on the x axis)."""
    cols = [c for c in columns if c in frame]
    long = frame[["iteration", *cols]].melt(id_vars=["iteration"], var_name="score", value_name="value").dropna()
    return alt.Chart(long, title=title).mark_line(point=True).encode(
        x=alt.X("iteration:Q", title="iteration (episode)", axis=alt.Axis(format="d", tickMinStep=1)),
        y=alt.Y("value:Q", title=unit or "score", axis=alt.Axis(format=NUMBER), scale=alt.Scale(zero=False)),
        tooltip=[alt.Tooltip("iteration:Q", title="iteration"), "score:N", alt.Tooltip("value:Q", format=NUMBER)],
        **series_colour("score", cols, title="score")).properties(height=260)


def components(vectors: pd.DataFrame, order: Sequence[str], *, title: str, noun: str = "tick",
               weighted: Sequence[str] = ()) -> alt.FacetChart:
    """An agent's reward vector over ticks: one small chart per component, each on its own scale (a catch in tons
    beside a count of violations), the components the reward weighs in blue, the others grey."""
    data = vectors.assign(role=vectors["component"].map(lambda c: "weighed in the reward" if c in weighted else "recorded"))
    base = alt.Chart(data).mark_line(point=data["tick"].nunique() <= 40).encode(
        x=tick_axis(noun), y=alt.Y("value:Q", title=None, axis=alt.Axis(format=NUMBER), scale=alt.Scale(zero=False)),
        color=alt.Color("role:N", title=None, scale=alt.Scale(domain=["weighed in the reward", "recorded"],
                                                             range=["#4c78a8", "#888888"]), legend=alt.Legend(orient="top")),
        tooltip=["component:N", alt.Tooltip("tick:Q", title=noun), alt.Tooltip("value:Q", format=NUMBER)],
    ).properties(width=240, height=110)
    return base.facet(facet=alt.Facet("component:N", title=None, sort=list(order)), columns=3, title=title).resolve_scale(
        y="independent")


#: memory items a timeline draws at most (the latest ones)
MEMORY_ITEMS = 60


def memory_timeline(timeline: pd.DataFrame, noun: str = "tick") -> alt.Chart:
    """Concordia's memory timeline: one bar per memory item from the tick it entered to the last tick it was held,
    coloured by its kind; the item's text on the axis and in the tooltip."""
    data = timeline.tail(MEMORY_ITEMS).copy()
    data["label"] = [f"{i}. {t if len(t) <= 48 else t[:47] + '…'}" for i, t in zip(data["item"], data["text"])]
    data["start"], data["end"] = data["entered"] - 0.45, data["held_until"] + 0.45
    kinds = sorted(data["kind"].unique())
    return alt.Chart(data, title=f"Memory items over {noun}s").mark_bar(height=10).encode(
        x=alt.X("start:Q", title=noun, axis=alt.Axis(format="d", tickMinStep=1)), x2="end:Q",
        y=alt.Y("label:N", title=None, sort=data["label"].tolist(), axis=alt.Axis(labelLimit=360)),
        tooltip=["item:Q", "kind:N", "text:N", alt.Tooltip("tick:Q", title=f"about {noun}"),
                 alt.Tooltip("entered:Q", title="entered"), alt.Tooltip("held_until:Q", title="held until")],
        **series_colour("kind", kinds, title="kind", symbol="square")).properties(height=max(80, 16 * len(data)))
