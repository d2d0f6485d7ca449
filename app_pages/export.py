"""Exports a researcher takes away: a figure as PNG or SVG, a page as a one-page HTML report.

Figures are rendered on the server by vl-convert (the Vega-Lite compiler without a browser), so an export is
the chart as drawn, and the HTML report is self-contained: inline SVG figures and HTML tables, no script and
nothing fetched when it is opened. Every piece of text in a report is escaped: LLM-written text cannot add markup.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any, Union

import altair as alt
import pandas as pd
import streamlit as st

#: a report is built of these: a heading (str), a chart, a table, or ("text", str) for a paragraph
Block = Union[str, alt.TopLevelMixin, pd.DataFrame, tuple[str, str]]


#: a figure's plot width when exported (a chart in the page takes its column's width)
FIGURE_WIDTH = 640
#: the plot's height is the chart's `height` and its width the column's; titles, axes and legends come on top (so
#: a legend of 11 groups and the rows of 2 are never squeezed into a fixed box)
AUTOSIZE = alt.AutoSizeParams(type="fit-x", contains="padding")


def sized(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """`chart` with `AUTOSIZE` (unless it sets its own)."""
    if getattr(chart, "autosize", alt.Undefined) is not alt.Undefined or isinstance(chart, alt.FacetChart):
        return chart  # (a facet's cells keep their own width)
    return chart.properties(autosize=AUTOSIZE)


def _figure(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The chart's spec as a figure: white background, readable type, `FIGURE_WIDTH` wide unless it says otherwise."""
    with alt.data_transformers.enable("default", max_rows=None):  # (a figure holds all its rows)
        spec = chart.to_dict()
    spec.setdefault("width", FIGURE_WIDTH)
    spec.setdefault("background", "white")
    config = spec.setdefault("config", {})
    config.setdefault("font", "Helvetica, Arial, sans-serif")
    for part, sizes in (("axis", {"labelFontSize": 11, "titleFontSize": 12}), ("legend", {"labelFontSize": 11, "titleFontSize": 12}),
                        ("title", {"fontSize": 14})):
        config.setdefault(part, {})
        for k, v in sizes.items():
            config[part].setdefault(k, v)
    if isinstance(spec.get("autosize"), dict) and spec["autosize"].get("type") == "fit-x":
        spec["autosize"] = {"type": "pad", "contains": "padding"}  # (the figure's width is its plot's)
    return spec


def svg(chart: alt.TopLevelMixin) -> str:
    """The chart as an SVG document (a figure: `_figure`)."""
    import vl_convert as vlc

    return vlc.vegalite_to_svg(_figure(chart))


def png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    """The chart as a PNG image (`scale` x its size; a figure: `_figure`)."""
    import vl_convert as vlc

    return vlc.vegalite_to_png(_figure(chart), scale=scale)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "figure"


def chart(figure: alt.TopLevelMixin, name: str, *, key: str, on_select: Any = None, stretch: bool = True) -> Any:
    """Draw an Altair chart (`sized`) with PNG and SVG download buttons under it (rendered only when clicked); with
    `on_select` (a callback), a click on it calls it and reruns the page; `stretch` False keeps the chart's own width
    (a board drawn cell by cell)."""
    figure = sized(figure) if stretch else figure
    event = st.altair_chart(figure, width="stretch" if stretch else "content", key=f"chart-{key}",
                            on_select=on_select if on_select is not None else "ignore")
    slug = _slug(name)
    with st.container(horizontal=True, gap="small"):
        st.download_button("PNG", data=lambda: png(figure), file_name=f"{slug}.png", mime="image/png", key=f"png-{key}",
                           help="this figure as a PNG image", type="tertiary")
        st.download_button("SVG", data=lambda: svg(figure), file_name=f"{slug}.svg", mime="image/svg+xml",
                           key=f"svg-{key}", help="this figure as an SVG drawing", type="tertiary")
    return event


STYLE = """body{font-family:system-ui,sans-serif;max-width:1100px;margin:2em auto;color:#222}
table{border-collapse:collapse;font-size:13px;margin:0.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}figure{margin:0 0 1.5em}.meta{color:#666;font-size:13px}
pre{white-space:pre-wrap;background:#f7f7f7;padding:0.6em}"""


def html_report(title: str, blocks: Sequence[Block], *, subtitle: str = "") -> str:
    """A self-contained one-page HTML report: headings, paragraphs, inline SVG figures and tables, all escaped."""
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
             f"<style>{STYLE}</style></head><body><h1>{html.escape(title)}</h1>",
             f"<p class='meta'>{html.escape(subtitle)}{' · ' if subtitle else ''}made by societas on {stamp}</p>"]
    for block in blocks:
        if isinstance(block, str):
            parts.append(f"<h2>{html.escape(block)}</h2>")
        elif isinstance(block, tuple):
            parts.append(f"<p>{html.escape(str(block[1]))}</p>")
        elif isinstance(block, pd.DataFrame):
            parts.append(block.to_html(index=False, escape=True, na_rep="—", float_format=lambda v: f"{v:.4g}"))
        else:
            parts.append(f"<figure>{svg(block)}</figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


def report_button(title: str, build: Any, *, file_name: str, key: str, subtitle: str = "") -> None:
    """A download button for a one-page HTML report; `build()` returns its blocks, called only when clicked."""
    st.download_button("HTML report", data=lambda: html_report(title, build(), subtitle=subtitle),
                       file_name=f"{_slug(file_name)}.html", mime="text/html", key=key, icon=":material/description:",
                       help="one self-contained HTML page: figures as SVG, tables, no script")
