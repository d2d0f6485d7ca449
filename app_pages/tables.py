"""Tables the pages share: every row shown up to `ALL_ROWS` (a table of 16 donors is not cut at 10), a scrolling
table `SCROLL_ROWS` rows high past that; the id column pinned, so a table wider than the page scrolls sideways with
its ids in view; columns that hold nothing for any row left out (an empty `persona` for scripted fishers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union

import pandas as pd
import streamlit as st

#: a table of this many rows or fewer is shown whole; a longer one scrolls within `SCROLL_ROWS` rows' height
ALL_ROWS, SCROLL_ROWS = 30, 20
#: Streamlit's row height and header height in pixels (st.dataframe's defaults)
ROW_PX, HEADER_PX = 35, 38


def height(rows: int) -> Union[int, str]:
    """The table's height: its content up to `ALL_ROWS` rows, else `SCROLL_ROWS` rows and a scroll bar."""
    return "content" if rows <= ALL_ROWS else HEADER_PX + ROW_PX * SCROLL_ROWS


def filled(frame: pd.DataFrame, keep: tuple[str, ...] = ()) -> pd.DataFrame:
    """`frame` without the columns no row fills (missing, or blank text), except those in `keep`."""
    def empty(column: pd.Series) -> bool:
        values = column.dropna()
        return values.empty or bool(values.map(lambda v: isinstance(v, str) and not v.strip()).all())

    return frame[[c for c in frame.columns if c in keep or not empty(frame[c])]]


def table(frame: pd.DataFrame, *, pin: str = "agent_id", column_config: Mapping[str, Any] | None = None,
          key: str | None = None) -> None:
    """`frame` as a table: `filled` columns, its `pin` column pinned (unless `column_config` says how to show it),
    `height`, the page's width."""
    shown = filled(frame, keep=(pin,))
    config = dict(column_config or {})
    if pin in shown and pin not in config:
        config[pin] = st.column_config.Column(pin, pinned=True)
    st.dataframe(shown, hide_index=True, width="stretch", height=height(len(shown)), column_config=config, key=key)
