"""The grid maps: ASCII art as in the papers' code, parsed once into arrays.

Characters: `@` wall, `A` apple spawn point, `P` preferred player spawn, `.` or space empty; Cleanup
adds `H` river cell that starts polluted, `R` clean river cell and `S` stream (walkable, never
polluted, no apples). The Gathering maps are those of Leibo et al. (2017) as drawn in the policy-synthesis
paper's code (vicgalle/llm-policies-social-dilemmas: `small`, `default`, `large`) and Perolat et al.'s
Commons map (`commons`); the Cleanup maps are Hughes et al.'s (2018) `default` and the code's `small`.
`huge` tiles `large` 3 x 3 (114 x 42: room for 100 agents); a path to a text file gives a map of your own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Union

import numpy as np

from sim.core.errors import UsageError

GATHERING_SMALL = """\
@@@@@@@@@@@@@@@@@@
@P.....A.A.....P@
@......A.A......@
@......A.A......@
@......A.A......@
@......A.A......@
@......A.A......@
@......A.A......@
@................@
@@@@@@@@@@@@@@@@@@"""

GATHERING_DEFAULT = """\
@@@@@@@@@@@@@@@@@@@@@@@@@
@P.........AAA.........@
@..........AAA.........@
@..........AAA..........@
@..........AAA..........@
@..........AAA..........@
@..........AAA..........@
@..........AAA..........@
@..........AAA..........@
@..........AAA..........@
@...........................@
@...........................@
@..........AAA..........@
@..........AAA..........@
@..........AAA..........@
@..........AAA..........@
@..........AAA..........@
@..........AAA..........@
@..........AAA..........@
@..........AAA.........P@
@@@@@@@@@@@@@@@@@@@@@@@@@"""

GATHERING_LARGE = """\
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@.P...P......A....P.AAAAA....P..A.P.@
@..P.....A.P.AA....P....AAA....A..A.@
@.....A.AAA..AAA....A....A.AA.AAAA..@
@.A..AAA.A....A..A.AAA..A..A...A.A..@
@AAA..A.A....A..AAA.A..AAA........A.P@
@.A.A..AAA..AAA..A.A....A.AA...AA.AA@
@..A.A..AAA....A.A..AAA....AAA..A...@
@...AAA..A......AAA..A....AAAA......@
@.P..A.......A..A.AAA....A..A......P@
@A..AAA..A..A..AAA.A....AAAA.....P..@
@....A.A...AAA..A.A......A.AA...A.P.@
@.....AAA...A.A..AAA......AA...AAA.P@
@.A....A.....AAA..A..P..........A...@
@.......P.....A.........P..P.P.....P@
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@"""

COMMONS = """\
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@
@............................@
@...AAAA.......AAAA..........@
@...AAAA.......AAAA..........@
@...AAAA.......AAAA..........@
@...AAAA.......AAAA..........@
@............................@
@............................@
@........AAAAAA..............@
@........AAAAAA..............@
@........AAAAAA..............@
@........AAAAAA..............@
@............................@
@............................@
@...AAAA.......AAAA..........@
@...AAAA.......AAAA..........@
@...AAAA.......AAAA..........@
@...AAAA.......AAAA..........@
@............................@
@@@@@@@@@@@@@@@@@@@@@@@@@@@@@@"""

CLEANUP_DEFAULT = """\
@@@@@@@@@@@@@@@@@@
@RRRRRR     AAAAA@
@HHHHHH      AAAA@
@RRRRRR     AAAAA@
@RRRRR  P    AAAA@
@RRRRR    P AAAAA@
@HHHHH       AAAA@
@RRRRR      AAAAA@
@HHHHHHSSSSSSAAAA@
@HHHHHHSSSSSSAAAA@
@RRRRR   P P AAAA@
@HHHHH   P  AAAAA@
@RRRRRR    P AAAA@
@HHHHHH P   AAAAA@
@RRRRR       AAAA@
@HHHH    P  AAAAA@
@RRRRR       AAAA@
@HHHHH  P P AAAAA@
@RRRRR       AAAA@
@HHHH       AAAAA@
@RRRRR       AAAA@
@HHHHH      AAAAA@
@RRRRR       AAAA@
@HHHH       AAAAA@
@@@@@@@@@@@@@@@@@@"""

CLEANUP_SMALL = """\
@@@@@@@@@@@@@
@RRR   AAAAA@
@HHH   AAAAA@
@RRRSS AAAAA@
@RR  P AAAAA@
@HH  P AAAAA@
@RR  P AAAAA@
@RRRSS AAAAA@
@HHH   AAAAA@
@RRR   AAAAA@
@@@@@@@@@@@@@"""


def tiled(ascii_map: str, rows: int, cols: int) -> str:
    """`ascii_map` repeated rows x cols times, the inner border walls removed (one open world)."""
    lines = [line for line in ascii_map.strip().splitlines()]
    width = max(len(line) for line in lines)
    inner = [line.ljust(width, "@")[1:-1].replace("@", ".") for line in lines[1:-1]]
    body = ["@" + line * cols + "@" for line in inner] * rows
    wall = "@" * (len(body[0]))
    return "\n".join([wall, *body, wall])


GATHERING_MAPS = {"small": GATHERING_SMALL, "default": GATHERING_DEFAULT, "large": GATHERING_LARGE,
                  "commons": COMMONS, "huge": tiled(GATHERING_LARGE, 3, 3)}
CLEANUP_MAPS = {"small": CLEANUP_SMALL, "default": CLEANUP_DEFAULT, "large": tiled(CLEANUP_DEFAULT, 1, 2),
                "huge": tiled(CLEANUP_DEFAULT, 2, 4)}
_KNOWN = set("@AP. HRS")
#: the most cells a map may have (rows x columns): a world's set-up and memory grow with its cells (a Mesa cell, its
#: neighbours and a distance field entry each), and a 3000 x 3000 map took 6 GB before its first step
MAX_CELLS = 250_000


@dataclass(frozen=True)
class GridMap:
    """A parsed map: walls and the cells of each kind, as (row, col) in reading order."""

    walls: np.ndarray  # bool (H, W)
    apples: tuple[tuple[int, int], ...]
    spawns: tuple[tuple[int, int], ...]
    river: tuple[tuple[int, int], ...] = ()  # H and R cells: where waste may lie
    polluted: tuple[tuple[int, int], ...] = ()  # H cells: polluted at the start
    stream: tuple[tuple[int, int], ...] = ()
    open_cells: tuple[tuple[int, int], ...] = field(default=())  # walkable cells that are neither apple, river nor stream

    @property
    def shape(self) -> tuple[int, int]:
        return self.walls.shape  # type: ignore[return-value]

    @property
    def start_cells(self) -> int:
        """How many agents the map has room for at the start: its spawn points and open cells (cells are exclusive)."""
        return len(set(self.spawns) | set(self.open_cells))


def parse(ascii_map: str) -> GridMap:
    """Parse an ASCII map; refuses unknown characters, maps with no open cell and maps of more than MAX_CELLS cells.

    Lines shorter than the widest are padded with walls (the papers' code pads with empty cells, which opens
    pockets outside the border of its ragged `default` map; no rule depends on them). Parsed once per text (the
    config's check and the world read the same map); the result is read-only."""
    return _parse(ascii_map)


@lru_cache(maxsize=16)
def _parse(ascii_map: str) -> GridMap:
    lines = ascii_map.strip("\n").splitlines()
    if not lines:
        raise UsageError("the map is empty")
    width = max(len(line) for line in lines)
    if len(lines) * width > MAX_CELLS:
        raise UsageError(f"the map is {len(lines)} x {width} = {len(lines) * width:,} cells; a map has at most "
                         f"{MAX_CELLS:,} cells")
    bad = sorted({ch for line in lines for ch in line} - _KNOWN)
    if bad:
        raise UsageError(f"the map has unknown characters {''.join(bad)!r}; use @ wall, A apple, P spawn, . empty, "
                         "H polluted river, R river, S stream")
    walls = np.zeros((len(lines), width), dtype=bool)
    kinds: dict[str, list[tuple[int, int]]] = {k: [] for k in "APHRS"}
    for r, line in enumerate(lines):
        for c, ch in enumerate(line.ljust(width, "@")):
            if ch == "@":
                walls[r, c] = True
            elif ch in kinds:
                kinds[ch].append((r, c))
    river = sorted(kinds["H"] + kinds["R"])
    special = set(kinds["A"]) | set(river) | set(kinds["S"])
    open_cells = tuple((r, c) for r in range(walls.shape[0]) for c in range(width)
                       if not walls[r, c] and (r, c) not in special)
    if not open_cells and not kinds["P"]:
        raise UsageError("the map has no open cell to start on")
    walls.flags.writeable = False  # shared by every world built from this map
    return GridMap(walls=walls, apples=tuple(kinds["A"]), spawns=tuple(kinds["P"]), river=tuple(river),
                   polluted=tuple(sorted(kinds["H"])), stream=tuple(kinds["S"]), open_cells=open_cells)


def load(name: Union[str, Path], maps: dict[str, str]) -> GridMap:
    """A built-in map by name, or a map file (a path)."""
    if str(name) in maps:
        return parse(maps[str(name)])
    path = Path(name)
    if not path.is_file():
        raise UsageError(f"unknown map {str(name)!r}: give one of {', '.join(maps)} or a path to an ASCII map file")
    try:
        size = path.stat().st_size
        if size > 2 * MAX_CELLS + 10_000:  # (a character and a line break per cell at most, and slack)
            raise UsageError(f"the map file {path} is {size:,} bytes; a map has at most {MAX_CELLS:,} cells")
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the map {path}: {exc}") from exc
    return parse(text)
