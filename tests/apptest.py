"""Reading what a page drew in Streamlit's AppTest: every element under a node, and the Vega-Lite charts with
their data (Streamlit sends a chart's rows as Arrow tables beside its spec)."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd


def elements(node: Any, out: list | None = None) -> list:
    """`node` and every element under it, depth first."""
    out = [] if out is None else out
    out.append(node)
    children = getattr(node, "children", None)
    if isinstance(children, dict):
        for child in children.values():
            elements(child, out)
    return out


def _frame(data: bytes) -> pd.DataFrame:
    import pyarrow as pa

    return pa.ipc.open_stream(data).read_pandas()


def charts(at: Any) -> list[tuple[dict, dict[str, pd.DataFrame]]]:
    """Every Vega-Lite chart of the page's main area: its spec, and its named datasets as DataFrames (`_main`: the
    chart's own data, where it has some)."""
    out = []
    for el in elements(at.main):
        if getattr(el, "type", "") == "vega_lite_chart":
            data = {d.name: _frame(d.data.data) for d in el.proto.datasets}
            if el.proto.data.data:
                data["_main"] = _frame(el.proto.data.data)
            out.append((json.loads(el.proto.spec), data))
    return out
