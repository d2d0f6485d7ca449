"""The Compare page's charts: groups named by short unique names (G1, G2, ...) on axes and legends, the full label
in the tooltip and in the page's legend table, so long labels are never cut into look-alikes; every group its own
colour (`charts.series_colour`); every interval named by what it is."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Optional

import altair as alt
import pandas as pd

from app_pages.charts import NUMBER, series_colour, tick_axis, titled, value_axis

#: each group's row of an interval chart, in pixels of plot height
ROW = 34


def _named(frame: pd.DataFrame, names: Mapping[str, str], column: str = "group") -> pd.DataFrame:
    out = frame.copy()
    out["label"] = out[column].astype(str)
    out["name"] = out[column].map(lambda g: names.get(g, str(g)))
    return out


def order(names: Mapping[str, str]) -> list[str]:
    """The short names in their number's order (G2 before G10)."""
    def key(name: str) -> tuple:
        digits = "".join(ch for ch in name if ch.isdigit())
        return (name.rstrip("0123456789"), int(digits) if digits else 0, name)
    return sorted(set(names.values()), key=key)


def ci_points(summary: pd.DataFrame, values: pd.DataFrame, names: Mapping[str, str], *, title: str = "",
              bounds: Optional[tuple[float, float]] = None, unit: str = "", metric: str = "value") -> alt.LayerChart:
    """One row per group (its short name): its runs' values as dots, the mean as a diamond, the 95% interval as an
    error bar; the full group label and the interval's method in every tooltip. Each row keeps `ROW` pixels of
    plot height whatever the number of groups."""
    rows = order(names)
    y = alt.Y("name:N", title=None, sort=rows, axis=alt.Axis(labelLimit=0),
              scale=alt.Scale(domain=rows, paddingInner=0.3, paddingOuter=0.3))
    scale = alt.Scale(zero=False)
    if bounds is not None and all(math.isfinite(b) for b in bounds):
        scale = alt.Scale(zero=False, domainMin=bounds[0], domainMax=bounds[1], clamp=True, nice=False)
    x_title = titled(metric, unit)
    runs = _named(values, names)
    dots = alt.Chart(runs).mark_circle(opacity=0.55, size=60).encode(
        y=y, x=alt.X("value:Q", title=x_title, scale=scale, axis=value_axis(runs["value"])),
        tooltip=["name:N", "label:N", "run_id:N", alt.Tooltip("value:Q", format=NUMBER, title=x_title)])
    summ = _named(summary, names)
    tips = ["name:N", "label:N", "n:Q", alt.Tooltip("mean:Q", format=NUMBER), alt.Tooltip("lo:Q", format=NUMBER, title="95% lo"),
            alt.Tooltip("hi:Q", format=NUMBER, title="95% hi"), alt.Tooltip("method:N", title="interval")]
    with_ci = summ.dropna(subset=["lo", "hi"])
    bars = alt.Chart(with_ci).mark_rule(strokeWidth=2, color="black").encode(
        y=y, x=alt.X("lo:Q", scale=scale, title=x_title), x2="hi:Q", tooltip=tips)
    mean = alt.Chart(summ.dropna(subset=["mean"])).mark_point(shape="diamond", size=120, filled=True,
                                                               color="black").encode(y=y, x=alt.X("mean:Q", scale=scale),
                                                                                     tooltip=tips)
    return alt.layer(dots, bars, mean).properties(title=title, height=ROW * max(1, len(rows)))


def survival_curves(curves: pd.DataFrame, names: Mapping[str, str], horizon: Optional[float] = None,
                    noun: str = "tick") -> alt.LayerChart:
    """Kaplan-Meier step curves, one per group (short names in the legend), each with its 95% Greenwood band; the x
    axis runs to the longest horizon, in the scenario's unit of time."""
    data = _named(curves, names)
    top = max(float(horizon or 0), float(pd.to_numeric(data["time"], errors="coerce").max() or 0))
    rows = order(names)
    colour = series_colour("name", rows, title="group")
    x = alt.X("time:Q", title=f"{noun}s survived", scale=alt.Scale(domain=[0, top], nice=False),
              axis=alt.Axis(format="d", tickMinStep=1))
    tips = ["name:N", "label:N", alt.Tooltip("time:Q", title=noun), alt.Tooltip("survival:Q", format=".3f", title="S(t)"),
            alt.Tooltip("lo:Q", format=".3f", title="95% lo (Greenwood)"), alt.Tooltip("hi:Q", format=".3f", title="95% hi (Greenwood)"),
            "at_risk:Q", "collapsed:Q", "censored:Q"]
    base = alt.Chart(data).encode(x=x)
    band = base.mark_area(interpolate="step-after", opacity=0.15).encode(
        y=alt.Y("lo:Q", scale=alt.Scale(domain=[0, 1]), title="S(t): share of runs not collapsed"), y2="hi:Q",
        color=colour["color"], tooltip=tips)
    curve = base.mark_line(interpolate="step-after", point=True).encode(
        y=alt.Y("survival:Q", scale=alt.Scale(domain=[0, 1]), title="S(t): share of runs not collapsed",
                axis=alt.Axis(format=".2~f")), tooltip=tips, **colour)
    return alt.layer(band, curve).properties(
        title=alt.TitleParams("Kaplan-Meier: share of runs not collapsed",
                              subtitle="shaded: 95% pointwise band (Greenwood, log-log)"), height=300)


def collapsed_by(frame: pd.DataFrame, names: Mapping[str, str], noun: str = "tick") -> alt.LayerChart:
    """GovSim's share of runs collapsed by each tick, per group, with its 95% Wilson interval as error bars (each
    group's bars a little apart, so they do not hide each other)."""
    data = _named(frame, names)
    rows = order(names)
    spread = 0.5 / max(1, len(rows))
    data["at"] = data["tick"] + data["name"].map({n: (k - (len(rows) - 1) / 2) * spread for k, n in enumerate(rows)})
    colour = series_colour("name", rows, title="group")
    tips = ["name:N", "label:N", alt.Tooltip("tick:Q", title=noun), "collapsed:Q", alt.Tooltip("runs:Q", title="runs observed"),
            alt.Tooltip("share:Q", format=".2f"), alt.Tooltip("lo:Q", format=".2f", title="95% lo (Wilson)"),
            alt.Tooltip("hi:Q", format=".2f", title="95% hi (Wilson)")]
    y = alt.Y("share:Q", title="share of runs collapsed", scale=alt.Scale(domain=[0, 1]), axis=alt.Axis(format=".0%"))
    line = alt.Chart(data).mark_line(point=True, interpolate="step-after").encode(x=tick_axis(noun), y=y, tooltip=tips, **colour)
    bars = alt.Chart(data).mark_rule(opacity=0.45, strokeWidth=3).encode(
        x=alt.X("at:Q", title=noun, axis=alt.Axis(format="d", tickMinStep=1)), y=alt.Y("lo:Q", title="share of runs collapsed"),
        y2="hi:Q", color=colour["color"], tooltip=tips)
    return alt.layer(bars, line).properties(
        title=alt.TitleParams(f"Share of runs collapsed by each {noun}",
                              subtitle="bars: 95% Wilson interval of the share"), height=260)


def over_time(frame: pd.DataFrame, names: Mapping[str, str], metric: str, *, unit: str = "",
              lines: Optional[pd.DataFrame] = None, noun: str = "tick", runs: Optional[pd.DataFrame] = None,
              select: Optional[str] = None) -> alt.LayerChart:
    """Per group: the mean over its runs as a line and their min-max as a band, over ticks, with every run's own line
    thin beside it (`runs`: `analysis.compare.run_series`; the zeros after a collapse dotted); the scenario's
    reference lines dashed with their labels. `select`: a click selection on the runs' points (the page opens that
    run's tick)."""
    data = _named(frame, names)
    rows = order(names)
    colour = series_colour("name", rows, title="group")
    y_title = titled(metric, unit)
    x = tick_axis(noun)
    band = alt.Chart(data).mark_area(opacity=0.15).encode(
        x=x, y=alt.Y("lo:Q", title=y_title, scale=alt.Scale(zero=False), axis=alt.Axis(format=NUMBER)), y2="hi:Q",
        color=colour["color"])
    tips = ["name:N", "label:N", alt.Tooltip("tick:Q", title=noun), alt.Tooltip("runs:Q", title="runs counted"),
            alt.Tooltip("after_collapse:Q", title="of which collapsed (0)"), alt.Tooltip("mean:Q", format=NUMBER),
            alt.Tooltip("lo:Q", format=NUMBER, title="min over runs"), alt.Tooltip("hi:Q", format=NUMBER, title="max over runs")]
    mean = alt.Chart(data).mark_line(strokeWidth=3).encode(x=x, y=alt.Y("mean:Q", title=y_title), tooltip=tips, **colour)
    layers: list[alt.Chart] = [band]
    if runs is not None and not runs.empty:
        each = _named(runs, names)
        each["part"] = each["after_collapse"].map({True: "after collapse (0)", False: "run"})
        run_tips = ["name:N", "run_id:N", alt.Tooltip("tick:Q", title=noun), alt.Tooltip("value:Q", format=NUMBER, title=y_title),
                    "part:N"]
        thin = alt.Chart(each).mark_line(strokeWidth=1, opacity=0.45).encode(
            x=x, y=alt.Y("value:Q", title=y_title), detail="run_id:N", color=colour["color"],
            strokeDash=alt.StrokeDash("part:N", scale=alt.Scale(domain=["run", "after collapse (0)"], range=[[1, 0], [2, 3]]),
                                      legend=alt.Legend(title="each run")),
            tooltip=run_tips)
        layers.append(thin)
        if select is not None:
            pick = alt.selection_point(name=select, fields=["run_id", "tick"], on="click", nearest=True)
            layers.append(alt.Chart(each[~each["after_collapse"]]).mark_point(size=30, filled=True, cursor="pointer").encode(
                x=x, y=alt.Y("value:Q", title=y_title), color=colour["color"], tooltip=run_tips,
                opacity=alt.condition(pick, alt.value(0.9), alt.value(0.35))).add_params(pick))
    layers.append(mean)
    if lines is not None and not lines.empty:
        ref = lines.copy()
        ref["text"] = [f"{lab}" + (f" ({names.get(g, g)})" if g else "") for lab, g in zip(ref["label"], ref["group"])]
        rule = alt.Chart(ref).mark_rule(strokeDash=[5, 4], color="#555").encode(
            y="value:Q", tooltip=["text:N", alt.Tooltip("value:Q", format=NUMBER)])
        text = alt.Chart(ref).mark_text(align="left", dx=4, dy=-6, color="#555", fontSize=11).encode(
            y="value:Q", x=alt.value(4), text="text:N")
        layers += [rule, text]
    return alt.layer(*layers).properties(
        title=alt.TitleParams(f"{metric} over {noun}s",
                              subtitle="thick: mean over a group's runs; shaded: min-max over its runs; thin: each run"),
        height=320)


def legend_table(legend: pd.DataFrame, columns: Sequence[str] = ("name", "runs", "backend", "group")) -> pd.DataFrame:
    """The legend as shown: short name, runs, backend, full label."""
    return legend[[c for c in columns if c in legend]]
