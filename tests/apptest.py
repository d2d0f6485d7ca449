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


# ----- what a chart's encodings name, against the data it has ---------------------------------------------------------
_ENCODING_FIELDS_SKIP = {"scale", "axis", "legend", "header", "condition", "bin", "impute", "stack"}


def _unescape_top(name: str) -> tuple[str, bool]:
    """A Vega-Lite field as the column it reads: (name, True) when it is a plain (or escaped) column name, (first
    part, False) when an unescaped dot or bracket makes it a nested path (a column named `state.stock` is then not
    read: the chart is blank)."""
    out, i = [], 0
    while i < len(name):
        ch = name[i]
        if ch == "\\" and i + 1 < len(name):
            out.append(name[i + 1])
            i += 2
            continue
        if ch in ".[":
            return "".join(out), False
        out.append(ch)
        i += 1
    return "".join(out), True


def _fields(encoding: dict) -> list[str]:
    """Every field an encoding names (channels, tooltips, conditions' fields; not sorts or params)."""
    found: list[str] = []
    for channel, value in encoding.items():
        for item in value if isinstance(value, list) else [value]:
            if not isinstance(item, dict):
                continue
            if isinstance(item.get("field"), str) and item.get("aggregate") != "count":
                found.append(item["field"])
            cond = item.get("condition")
            for c in cond if isinstance(cond, list) else [cond]:
                if isinstance(c, dict) and isinstance(c.get("field"), str):
                    found.append(c["field"])
    return found


def _made_by_transforms(spec: dict) -> set[str]:
    """Fields a view's transforms make (calculate, fold, window, aggregate, bin, ...: their `as`)."""
    made: set[str] = set()
    for t in spec.get("transform", []) or []:
        for key in ("as", "groupby"):
            value = t.get(key)
            if isinstance(value, str):
                made.add(value)
            elif isinstance(value, list):
                made.update(v if isinstance(v, str) else v.get("as", "") for v in value)
        for key in ("aggregate", "window", "joinaggregate"):
            for part in t.get(key, []) or []:
                if isinstance(part, dict) and part.get("as"):
                    made.add(part["as"])
    return made


def chart_problems(spec: dict, data: dict[str, pd.DataFrame], inherited: pd.DataFrame | None = None,
                   path: str = "chart", made: set[str] | None = None) -> list[str]:
    """What is wrong with a chart's spec against its data: a view with no rows, or an encoding naming a field its
    data lacks (a nested path where the column has a dot in its name counts: nothing would be drawn)."""
    problems: list[str] = []
    frame = inherited if inherited is not None or path != "chart" else data.get("_main")
    name = (spec.get("data") or {}).get("name")
    if name is not None:
        frame = data.get(name)
        if frame is None:
            problems.append(f"{path}: dataset {name!r} not sent")
    elif "values" in (spec.get("data") or {}):
        frame = pd.DataFrame(spec["data"]["values"])
    made = set(made or ()) | _made_by_transforms(spec)
    if "facet" in spec and isinstance(spec["facet"], dict) and isinstance(spec["facet"].get("field"), str):
        col, plain = _unescape_top(spec["facet"]["field"])
        if frame is not None and (not plain or col not in frame.columns) and col not in made:
            problems.append(f"{path}: facet field {spec['facet']['field']!r} not in the data")
    encoding = spec.get("encoding") or {}
    if encoding and "layer" not in spec:
        if frame is None:
            problems.append(f"{path}: no data")
        else:
            if frame.empty and spec.get("mark") not in ("rule", "text") and not (isinstance(spec.get("mark"), dict)
                                                                              and spec["mark"].get("type") in ("rule", "text")):
                problems.append(f"{path}: no rows")
            for f in _fields(encoding):
                col, plain = _unescape_top(f)
                if col in made and plain:
                    continue
                if not plain or col not in frame.columns:
                    problems.append(f"{path}: field {f!r} not a column of its data ({list(frame.columns)[:12]})")
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for i, sub in enumerate(spec.get(key, []) or []):
            problems += chart_problems(sub, data, frame, f"{path}.{key}[{i}]", made)
    if isinstance(spec.get("spec"), dict):
        problems += chart_problems(spec["spec"], data, frame, f"{path}.spec", made)
    return problems


def specs(at: Any) -> list[dict]:
    """The Vega-Lite specs of the page's charts, their data as records under `datasets`."""
    return [{**spec, "datasets": {name: frame.to_dict("records") for name, frame in data.items()}}
            for spec, data in charts(at)]
