"""The grid games drawn: the board at a step as an Altair chart with a step slider of its own (scrubbing is drawn in
the browser, no rerun), and the steps as an animated GIF (Pillow): agents (a colour each, an arrow where they face,
grey when tagged out), apples, the river and its waste, tagging and cleaning beams."""

from __future__ import annotations

import io
from collections.abc import Sequence

import altair as alt
import numpy as np
import pandas as pd
from PIL import Image, ImageDraw

from app_pages.charts import COLOURS
from scenarios.grid.frames import ARROWS, Board

#: a layer's colour on the board (agents have their own)
LAYER_COLOURS = {"wall": "#555555", "river": "#cfe8f6", "apple": "#3aa84a", "waste": "#8c6d31", "beam": "#f2c14e",
                 "clean beam": "#9be3f2", "tagged out": "#bbbbbb"}
BOARD = 440  # the board's width in pixels (a cell takes BOARD / width, 8 to 24)
GIF_CELL = 10  # and in the animation


def layers_of(b: Board) -> list[str]:
    """The layers this board can show, in `LAYER_COLOURS`' order: walls and apples where its map has them, the river,
    its waste and the cleaning beam only where it has a river (Cleanup, not Gathering); the tagging beam and tagged-out
    agents in both games."""
    has = {"wall": bool(np.asarray(b.walls).any()), "river": bool(b.river), "apple": bool(b.apples),
           "waste": bool(b.river), "clean beam": bool(b.river)}
    return [layer for layer in LAYER_COLOURS if has.get(layer, True)]


def _rects(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    out["col2"], out["row2"] = out["col"] + 1, out["row"] + 1
    return out


def board_chart(b: Board, cells: pd.DataFrame, agents: pd.DataFrame, walls: pd.DataFrame, *, start: int, title: str,
                noun: str = "step", ids: Sequence[int] = ()) -> alt.LayerChart:
    """The board with a `step` slider over the frames in `cells` (one per tick), starting at `start`; agents named by
    their ids (`ids`: the run's agent ids in the state's order; else their positions)."""
    h, w = b.shape
    cell = cell_size(b)
    first, last = int(cells["tick"].min()), int(cells["tick"].max())
    step = alt.param(name="step", value=int(min(max(start, first), last)),
                     bind=alt.binding_range(min=first, max=last, step=1, name=f"{noun} "))
    x = alt.X("col:Q", scale=alt.Scale(domain=[0, w], nice=False), axis=None)
    y = alt.Y("row:Q", scale=alt.Scale(domain=[h, 0], nice=False), axis=None)
    shown = layers_of(b)  # (the legend lists only what this game has: no river in Gathering's)
    colour = alt.Color("layer:N", title=None, scale=alt.Scale(domain=shown, range=[LAYER_COLOURS[k] for k in shown]),
                       legend=alt.Legend(orient="bottom", columns=4))
    wall = alt.Chart(_rects(walls)).mark_rect(color=LAYER_COLOURS["wall"]).encode(x=x, x2="col2:Q", y=y, y2="row2:Q")
    now = alt.datum.tick == step
    ground = alt.Chart(_rects(cells[cells["layer"].isin([k for k in ("river", "apple", "waste", "beam", "clean beam")
                                                         if k in shown])])).mark_rect(
        opacity=0.9).encode(x=x, x2="col2:Q", y=y, y2="row2:Q", color=colour,
                            tooltip=["layer:N", "row:Q", "col:Q"]
                            ).add_params(step).transform_filter(now)
    name = (lambda i: f"agent {ids[int(i)]}" if int(i) < len(ids) else f"agent {int(i)}")
    placed = agents.assign(cx=agents["col"] + 0.5, cy=agents["row"] + 0.5, arrow=agents["orient"].map(ARROWS),
                           who=agents["agent"].map(name))
    order = [name(i) for i in sorted(placed["agent"].unique())]
    body = alt.Chart(placed).mark_circle(size=cell * cell * 0.9, opacity=1).encode(
        x=alt.X("cx:Q", scale=alt.Scale(domain=[0, w], nice=False), axis=None),
        y=alt.Y("cy:Q", scale=alt.Scale(domain=[h, 0], nice=False), axis=None),
        color=alt.condition("datum.out", alt.value(LAYER_COLOURS["tagged out"]),
                            alt.Color("who:N", title="agents", sort=order, scale=alt.Scale(domain=order, range=_agent_colours(len(order))),
                                      legend=alt.Legend(orient="bottom", columns=6))),
        tooltip=["who:N", "row:Q", "col:Q", "arrow:N", alt.Tooltip("timeout:Q", title="tagged out for")],
    ).transform_filter(now)
    face = alt.Chart(placed).mark_text(fontSize=max(7, cell - 3), fontWeight="bold", color="white").encode(
        x=alt.X("cx:Q", scale=alt.Scale(domain=[0, w], nice=False), axis=None),
        y=alt.Y("cy:Q", scale=alt.Scale(domain=[h, 0], nice=False), axis=None), text="arrow:N").transform_filter(now)
    label = alt.Chart(pd.DataFrame({"x": [0]})).mark_text(align="left", baseline="bottom", dy=-4, fontSize=12).encode(
        x=alt.value(0), y=alt.value(0), text=alt.Text("t:N")).transform_calculate(t=f"'{noun} ' + step")
    return alt.layer(wall, ground, body, face, label).properties(
        title=title, width=cell * w, height=cell * h, autosize=alt.AutoSizeParams(type="pad")).resolve_scale(color="independent")


def cell_size(b: Board) -> int:
    """Pixels a cell takes on the board chart: about `BOARD` wide in all, 8 to 28 a cell."""
    return int(min(24, max(8, BOARD // max(1, b.shape[1]))))


def _agent_colours(n: int) -> list[str]:
    skip = {"#54a24b", "#2ca02c"}  # (apples are green)
    pool = [c for c in COLOURS if c not in skip]
    return [pool[i % len(pool)] for i in range(n)]


def _rgb(colour: str) -> tuple[int, int, int]:
    colour = colour.lstrip("#")
    return int(colour[0:2], 16), int(colour[2:4], 16), int(colour[4:6], 16)


def animation(b: Board, cells: pd.DataFrame, agents: pd.DataFrame, ticks: Sequence[int], *, fps: float = 4.0) -> bytes:
    """The steps `ticks` as an animated GIF: the board (walls, river, waste, apples, beams) and each agent in its
    colour with a dot on the side it faces (grey when tagged out)."""
    h, w = b.shape
    base = np.full((h, w, 3), 255, dtype=np.uint8)
    base[b.walls] = _rgb(LAYER_COLOURS["wall"])
    colours = [_rgb(c) for c in _agent_colours(int(agents["agent"].max()) + 1 if len(agents) else 1)]
    by_tick = dict(tuple(cells.groupby("tick"))) if len(cells) else {}
    agents_by_tick = dict(tuple(agents.groupby("tick"))) if len(agents) else {}
    images = []
    for t in ticks:
        grid = base.copy()
        part = by_tick.get(t)
        if part is not None:
            for layer in ("river", "waste", "apple", "beam", "clean beam"):
                sel = part[part["layer"] == layer]
                grid[sel["row"].to_numpy(int), sel["col"].to_numpy(int)] = _rgb(LAYER_COLOURS[layer])
        image = Image.fromarray(np.repeat(np.repeat(grid, GIF_CELL, axis=0), GIF_CELL, axis=1))
        draw = ImageDraw.Draw(image)
        for _, a in (agents_by_tick.get(t, pd.DataFrame(columns=agents.columns))).iterrows():
            r, c = int(a["row"]) * GIF_CELL, int(a["col"]) * GIF_CELL
            fill = _rgb(LAYER_COLOURS["tagged out"]) if a["out"] else colours[int(a["agent"])]
            draw.ellipse([c + 1, r + 1, c + GIF_CELL - 2, r + GIF_CELL - 2], fill=fill)
            dr, dc = {0: (-1, 0), 1: (0, 1), 2: (1, 0), 3: (0, -1)}[int(a["orient"]) % 4]
            cy, cx = r + GIF_CELL / 2 + dr * GIF_CELL / 3, c + GIF_CELL / 2 + dc * GIF_CELL / 3
            draw.ellipse([cx - 1.5, cy - 1.5, cx + 1.5, cy + 1.5], fill=(255, 255, 255))
        draw.text((2, 0), f"{int(t)}", fill=(0, 0, 0))
        images.append(image.convert("P", palette=Image.Palette.ADAPTIVE, colors=64))
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:], duration=int(1000 / fps), loop=0)
    return out.getvalue()

