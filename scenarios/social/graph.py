"""The follow graph: a networkx DiGraph on nodes 0..n-1, edge u -> v meaning "u follows v".

Generated graphs are oriented so that in-degree means followers:
- `ba` Barabási–Albert (m edges per new node): the newcomer follows the m nodes it attaches
  to (edge new -> old), so followers are preferentially attached (in-degree ~ power law).
- `ws` Watts–Strogatz ring (k = 2m neighbours, rewiring `rewire`), `er` Erdős–Rényi
  (mean out-degree m): each undirected tie becomes a follow in a random direction (ER is
  drawn directed directly).
- `complete`: everyone follows everyone; `empty`: nobody follows anybody.
- a path: an edge-list file, one "follower followee" pair per line (whitespace or comma,
  `#` comments); node labels are mapped to agents in sorted order.
In a generated graph each follow is then returned (a follow-back) with probability `follow_back`;
a loaded graph is taken as it is.
"""

from __future__ import annotations

import re
from pathlib import Path

import networkx as nx
import numpy as np

GENERATED = ("ba", "ws", "er", "complete", "empty")
MAX_COMPLETE = 3000  # n(n-1) edges: a complete follow graph beyond this is refused


def read_edgelist(path: str | Path) -> list[tuple[str, str]]:
    """The (follower, followee) label pairs of an edge-list file; ValueError naming the bad line."""
    pairs = []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"edge-list {str(path)!r} is not UTF-8 text (binary, or another encoding)") from None
    except OSError as exc:
        raise ValueError(f"cannot read edge-list {str(path)!r}: {exc.strerror}") from None
    for no, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [p for p in re.split(r"[\s,]+", line) if p]
        if len(parts) < 2:
            raise ValueError(f"edge-list {str(path)!r} line {no}: expected 'follower followee', got {line!r}")
        pairs.append((parts[0], parts[1]))
    return pairs


def _label_order(labels: set[str]) -> list[str]:
    if all(re.fullmatch(r"-?\d+", s) for s in labels):
        return sorted(labels, key=int)
    return sorted(labels)


def edgelist_nodes(path: str | Path) -> int:
    """How many distinct nodes an edge-list file names."""
    return len({x for pair in read_edgelist(path) for x in pair})


def build_graph(kind: str, n: int, m: int, rewire: float, follow_back: float, seed: int) -> nx.DiGraph:
    """The initial follow graph of `n` agents; all randomness from `seed`."""
    rng = np.random.default_rng(seed)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    edges: np.ndarray
    if kind == "empty" or n < 2:
        return g
    if kind == "complete":
        g.add_edges_from((u, v) for u in range(n) for v in range(n) if u != v)
        return g
    if kind == "ba":
        und = nx.barabasi_albert_graph(n, min(m, n - 1), seed=seed)
        edges = np.array([(max(u, v), min(u, v)) for u, v in und.edges()], dtype=np.int64).reshape(-1, 2)
    elif kind == "ws":
        k = min(2 * m, n - 1 - (n - 1) % 2)
        und = nx.watts_strogatz_graph(n, max(k, 2), rewire, seed=seed) if n > 2 else nx.path_graph(n)
        edges = np.array(list(und.edges()), dtype=np.int64).reshape(-1, 2)
        flip = rng.random(len(edges)) < 0.5
        edges[flip] = edges[flip][:, ::-1]
    elif kind == "er":
        d = nx.fast_gnp_random_graph(n, min(1.0, m / (n - 1)), seed=seed, directed=True)
        edges = np.array(list(d.edges()), dtype=np.int64).reshape(-1, 2)
    else:
        pairs = read_edgelist(kind)
        order = _label_order({x for pair in pairs for x in pair})
        if len(order) > n:
            raise ValueError(f"edge-list {kind!r} names {len(order)} nodes but agents={n}; set agents >= {len(order)}")
        index = {label: i for i, label in enumerate(order)}
        edges = np.array([(index[a], index[b]) for a, b in pairs if a != b], dtype=np.int64).reshape(-1, 2)
    g.add_edges_from(map(tuple, edges.tolist()))
    if follow_back > 0 and len(edges) and kind in GENERATED:
        back = edges[rng.random(len(edges)) < follow_back][:, ::-1]
        g.add_edges_from(map(tuple, back.tolist()))
    return g
