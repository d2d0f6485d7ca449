"""The Compare page's charts: groups named by short unique names (G1, G2, ...) on axes and legends, the full label
in the tooltip and in the page's legend table, so long labels are never cut into look-alikes, and the plot keeps
its width in a narrow column."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Optional

import altair as alt
import pandas as pd


def _named(frame: pd.DataFrame, names: Mapping[str, str], column: str = "group") -> pd.DataFrame:
    out = frame.copy()
    out["label"] = out[column].astype(str)
    out["name"] = out[column].map(lambda g: names.get(g, str(g)))
    return out


def _order(names: Mapping[str, str]) -> list[str]:
    def key(name: str) -> tuple:
        digits = "".join(ch for ch in name if ch.isdigit())
        return (name.rstrip("0123456789"), int(digits) if digits else 0, name)
    return sorted(set(names.values()), key=key)


def ci_points(summary: pd.DataFrame, values: pd.DataFrame, names: Mapping[str, str], *, title: str = "",
              bounds: Optional[tuple[float, float]] = None, unit: str = "") -> alt.LayerChart:
    """One row per group (its short name): its runs' values as dots, the mean as a diamond, the 95% interval as an
    error bar; the full group label in every tooltip."""
    order = _order(names)
    y = alt.Y("name:N", title=None, sort=order, axis=alt.Axis(labelLimit=0))
    scale = alt.Scale(zero=False)
    if bounds is not None and all(math.isfinite(b) for b in bounds):
        scale = alt.Scale(zero=False, domainMin=bounds[0], domainMax=bounds[1], clamp=True, nice=False)
    x_title = unit or None
    runs = _named(values, names)
    dots = alt.Chart(runs).mark_circle(opacity=0.55, size=60).encode(
        y=y, x=alt.X("value:Q", title=x_title, scale=scale),
        tooltip=["name:N", "label:N", "run_id:N", alt.Tooltip("value:Q", format=".4g")])
    summ = _named(summary, names)
    tips = ["name:N", "label:N", "n:Q", alt.Tooltip("mean:Q", format=".4g"), alt.Tooltip("lo:Q", format=".4g"),
            alt.Tooltip("hi:Q", format=".4g"), "method:N"]
    with_ci = summ.dropna(subset=["lo", "hi"])
    bars = alt.Chart(with_ci).mark_errorbar(ticks=True, thickness=2, color="black").encode(
        y=y, x=alt.X("lo:Q", scale=scale), x2="hi:Q", tooltip=tips)
    mean = alt.Chart(summ.dropna(subset=["mean"])).mark_point(shape="diamond", size=120, filled=True,
                                                               color="black").encode(y=y, x=alt.X("mean:Q", scale=scale),
                                                                                     tooltip=tips)
    rows = max(1, len(order))
    return alt.layer(dots, bars, mean).properties(title=title, height=min(600, 40 + 32 * rows))


def survival_curves(curves: pd.DataFrame, names: Mapping[str, str], horizon: Optional[float] = None) -> alt.Chart:
    """Kaplan-Meier step curves, one per group (short names in the legend); the x axis runs to the longest horizon."""
    data = _named(curves, names)
    top = max(float(horizon or 0), float(pd.to_numeric(data["time"], errors="coerce").max() or 0))
    return alt.Chart(data, title="Kaplan-Meier: share of runs not collapsed").mark_line(
        interpolate="step-after", point=True).encode(
        x=alt.X("time:Q", title="ticks survived", scale=alt.Scale(domain=[0, top], nice=False),
                axis=alt.Axis(format="d", tickMinStep=1)),
        y=alt.Y("survival:Q", scale=alt.Scale(domain=[0, 1]), title="S(t)"),
        color=alt.Color("name:N", title="group", sort=_order(names), legend=alt.Legend(labelLimit=0, symbolLimit=0)),
        tooltip=["name:N", "label:N", "time:Q", alt.Tooltip("survival:Q", format=".3f"), "at_risk:Q", "collapsed:Q",
                 "censored:Q"],
    ).properties(height=280)


def over_time(frame: pd.DataFrame, names: Mapping[str, str], metric: str, *, unit: str = "",
              lines: Optional[pd.DataFrame] = None, noun: str = "tick") -> alt.LayerChart:
    """Per group: the mean over its runs as a line and their min-max as a band, over ticks; the scenario's reference
    lines dashed with their labels."""
    data = _named(frame, names)
    order = _order(names)
    color = alt.Color("name:N", title="group", sort=order, legend=alt.Legend(labelLimit=0, symbolLimit=0))
    y_title = f"{metric} ({unit})" if unit else metric
    base = alt.Chart(data).encode(x=alt.X("tick:Q", title=noun, axis=alt.Axis(format="d", tickMinStep=1)))
    band = base.mark_area(opacity=0.2).encode(y=alt.Y("lo:Q", title=y_title, scale=alt.Scale(zero=False)),
                                              y2="hi:Q", color=color)
    tips = ["name:N", "label:N", "tick:Q", "runs:Q", alt.Tooltip("mean:Q", format=".4g"),
            alt.Tooltip("lo:Q", format=".4g", title="min"), alt.Tooltip("hi:Q", format=".4g", title="max")]
    mean = base.mark_line(point=len(data) <= 120).encode(y=alt.Y("mean:Q", title=y_title), color=color, tooltip=tips)
    layers: list[alt.Chart] = [band, mean]
    if lines is not None and not lines.empty:
        ref = lines.copy()
        ref["text"] = [f"{lab}" + (f" ({names.get(g, g)})" if g else "") for lab, g in zip(ref["label"], ref["group"])]
        rule = alt.Chart(ref).mark_rule(strokeDash=[5, 4], color="#555").encode(
            y="value:Q", tooltip=["text:N", alt.Tooltip("value:Q", format=".4g")])
        text = alt.Chart(ref).mark_text(align="left", dx=4, dy=-6, color="#555", fontSize=11).encode(
            y="value:Q", x=alt.value(4), text="text:N")
        layers += [rule, text]
    return alt.layer(*layers).properties(title=f"{metric} over {noun}s: mean and min-max over runs", height=300)


def legend_table(legend: pd.DataFrame, columns: Sequence[str] = ("name", "runs", "backend", "group")) -> pd.DataFrame:
    """The legend as shown: short name, runs, backend, full label."""
    return legend[[c for c in columns if c in legend]]
