"""Network, discourse and opinion metrics of the social scenario, as pure functions.

Inputs are plain data: a networkx DiGraph (the follow graph, edge u -> v: u follows v),
numpy arrays and lists of strings. Nothing here knows about Mesa or the store, so each
metric is tested on hand-built cases with known answers (tests/test_social.py).

Costs (N nodes, E edges): reciprocity O(E); degree statistics O(N log N); the power-law
fit O(N * distinct degrees); clustering O(sum of squared degrees of the sampled nodes);
mean shortest path O(sources * (N + E)) with numpy breadth-first search; text metrics
O(total words), never O(messages^2).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Optional

import networkx as nx
import numpy as np

_WORD = re.compile(r"[a-z0-9']+")


# ----- inequality ---------------------------------------------------------------------------
def gini(values: Sequence[float] | np.ndarray) -> float:
    """Gini coefficient of non-negative values (0 = all equal, -> 1 = one holds all); 0 if empty or all zero."""
    x = np.sort(np.asarray(values, dtype=float))
    if x.size == 0:
        return 0.0
    if x[0] < 0:
        x = x - x[0]
    total = x.sum()
    if total <= 0:
        return 0.0
    n = x.size
    ranks = np.arange(1, n + 1)
    return float(2.0 * np.dot(ranks, x) / (n * total) - (n + 1.0) / n)


def top_share(values: Sequence[float] | np.ndarray, share: float = 0.01) -> float:
    """Share of the total held by the top `share` of units (at least one unit); 0 if the total is 0."""
    x = np.asarray(values, dtype=float)
    total = x.sum()
    if x.size == 0 or total <= 0:
        return 0.0
    k = max(1, int(math.floor(share * x.size)))
    top = np.partition(x, x.size - k)[x.size - k:]
    return float(top.sum() / total)


# ----- the follow graph -------------------------------------------------------------------------
def reciprocity(graph: nx.DiGraph) -> float:
    """Share of follow edges u->v whose reverse v->u also exists (networkx `overall_reciprocity`); 0 without edges."""
    m = graph.number_of_edges()
    if m == 0:
        return 0.0
    succ = graph._succ  # noqa: SLF001 - read-only, avoids building views per edge
    mutual = sum(1 for u, nbrs in succ.items() for v in nbrs if u in succ[v])
    return mutual / m


def in_degrees(graph: nx.DiGraph, n: Optional[int] = None) -> np.ndarray:
    """In-degree (followers) of nodes 0..n-1."""
    n = graph.number_of_nodes() if n is None else n
    out = np.zeros(n, dtype=np.int64)
    for v, d in graph.in_degree():
        out[v] = d
    return out


def total_degrees(graph: nx.DiGraph, n: Optional[int] = None) -> np.ndarray:
    """In-degree + out-degree of nodes 0..n-1 (an edge counted once per endpoint)."""
    n = graph.number_of_nodes() if n is None else n
    out = np.zeros(n, dtype=np.int64)
    for v, d in graph.degree():
        out[v] = d
    return out


def undirected_clustering(graph: nx.DiGraph, nodes: Optional[Iterable[int]] = None) -> float:
    """Mean local clustering of the undirected view (u~v if u->v or v->u) over `nodes` (default all).

    A node with fewer than two neighbours counts as 0, as in networkx `average_clustering`.
    """
    succ, pred = graph._succ, graph._pred  # noqa: SLF001
    nodes = list(graph.nodes if nodes is None else nodes)
    if not nodes:
        return 0.0
    cache: dict[int, set[int]] = {}

    def nb(v: int) -> set[int]:
        s = cache.get(v)
        if s is None:
            s = (set(succ[v]) | set(pred[v])) - {v}
            cache[v] = s
        return s

    total = 0.0
    for v in nodes:
        nv = nb(v)
        k = len(nv)
        if k < 2:
            continue
        links = sum(len(nb(u) & nv) for u in nv) / 2
        total += links / (k * (k - 1) / 2)
    return total / len(nodes)


def _csr_undirected(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR arrays (indptr, indices) of the undirected graph on 0..n-1 with the given edges."""
    a = np.concatenate([src, dst])
    b = np.concatenate([dst, src])
    order = np.argsort(a, kind="stable")
    indices = b[order]
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(a, minlength=n), out=indptr[1:])
    return indptr, indices


def _bfs_distances(indptr: np.ndarray, indices: np.ndarray, source: int) -> np.ndarray:
    """Hop distances from `source` (-1 unreachable), one vectorised frontier expansion per level."""
    n = indptr.size - 1
    dist = np.full(n, -1, dtype=np.int64)
    dist[source] = 0
    frontier = np.array([source], dtype=np.int64)
    level = 0
    while frontier.size:
        level += 1
        starts, ends = indptr[frontier], indptr[frontier + 1]
        counts = ends - starts
        total = int(counts.sum())
        if total == 0:
            break
        offsets = np.repeat(starts - np.concatenate([[0], np.cumsum(counts)[:-1]]), counts)
        nbrs = indices[np.arange(total) + offsets]
        nbrs = np.unique(nbrs[dist[nbrs] < 0])
        dist[nbrs] = level
        frontier = nbrs
    return dist


def mean_shortest_path(graph: nx.DiGraph, sources: Optional[Sequence[int]] = None) -> Optional[float]:
    """Mean hop distance between connected pairs of the undirected view, from `sources` (default: all nodes).

    With a sample of sources this is the usual estimate for large graphs (each source's
    breadth-first search covers its whole component). None when no pair is connected.
    """
    n = graph.number_of_nodes()
    if n < 2 or graph.number_of_edges() == 0:
        return None
    edges = np.array(list(graph.edges), dtype=np.int64).reshape(-1, 2)
    indptr, indices = _csr_undirected(n, edges[:, 0], edges[:, 1])
    total = pairs = 0
    for s in range(n) if sources is None else sources:
        d = _bfs_distances(indptr, indices, int(s))
        reached = d[d > 0]
        total += int(reached.sum())
        pairs += reached.size
    return total / pairs if pairs else None


def powerlaw_fit(degrees: Sequence[int] | np.ndarray, min_tail: int = 50) -> dict[str, Optional[float]]:
    """Discrete power-law fit of a degree sequence (Clauset, Shalizi & Newman 2009).

    For each candidate x_min (distinct degrees >= 1 leaving at least `min_tail` points in
    the tail) the exponent is the discrete MLE approximation
    alpha = 1 + n / sum(ln(x / (x_min - 1/2))), and x_min is the one minimising the
    Kolmogorov-Smirnov distance between the tail's empirical CCDF and the fitted
    ((x - 1/2) / (x_min - 1/2))^(1 - alpha). Returns alpha, x_min, ks (the goodness of fit:
    smaller is better) and n_tail; Nones when no tail is large enough.
    """
    x = np.sort(np.asarray(degrees, dtype=float))
    x = x[x >= 1]
    none = {"alpha": None, "xmin": None, "ks": None, "n_tail": 0.0}
    if x.size < min_tail:
        return none
    best = None
    for xmin in np.unique(x):
        tail = x[np.searchsorted(x, xmin):]
        n = tail.size
        if n < min_tail:
            break
        logs = np.log(tail / (xmin - 0.5)).sum()
        if logs <= 0:
            continue
        alpha = 1.0 + n / logs
        values, first = np.unique(tail, return_index=True)
        emp = 1.0 - first / n  # P(X >= value) in the tail
        model = ((values - 0.5) / (xmin - 0.5)) ** (1.0 - alpha)
        ks = float(np.abs(emp - model).max())
        if best is None or ks < best[0]:
            best = (ks, alpha, float(xmin), float(n))
    if best is None:
        return none
    return {"alpha": float(best[1]), "xmin": best[2], "ks": best[0], "n_tail": best[3]}


# ----- threads and text --------------------------------------------------------------------------
def mean_or_none(values: Sequence[float] | np.ndarray) -> Optional[float]:
    """Mean, or None for an empty sequence."""
    x = np.asarray(values, dtype=float)
    return float(x.mean()) if x.size else None


def unreplied_share(replies: Sequence[int] | np.ndarray) -> Optional[float]:
    """Share of comments that received no reply, from their reply counts; None without comments."""
    r = np.asarray(replies)
    return float((r == 0).mean()) if r.size else None


def duplicate_share(texts: Sequence[str], seen: Optional[set[str]] = None) -> Optional[float]:
    """Share of messages whose exact text already occurred (earlier in `texts` or in `seen`).

    `seen` (updated in place when given) carries the texts of earlier ticks, so the share
    over a run is exact. None for no messages.
    """
    if not texts:
        return None
    seen = set() if seen is None else seen
    repeats = 0
    for t in texts:
        if t in seen:
            repeats += 1
        else:
            seen.add(t)
    return repeats / len(texts)


def squished(text: str) -> str:
    """A message as MoltBook's duplicate count keys it: lower-cased, blanks at its ends gone, every run of
    whitespace one space (R's `str_squish(str_to_lower(text))`, daveholtz/moltbook_scraper analysis/R/04_lexical.R 85)."""
    return " ".join(text.lower().split())


def copies_share(texts: Sequence[str]) -> Optional[float]:
    """MoltBook's exact-duplicate share (analysis/R/04_lexical.R 20-29, 83-90): of the messages with a non-empty
    text, the share whose squished text occurs more than once, every copy counted, the first included (3 copies
    of a greeting count 3); None without messages."""
    kept = [squished(t) for t in texts if t]
    if not kept:
        return None
    counts = Counter(kept)
    return sum(1 for t in kept if counts[t] > 1) / len(kept)


def reply_edges(authors: Sequence[int] | np.ndarray, parents: Sequence[int] | np.ndarray) -> set[tuple[int, int]]:
    """MoltBook's reply network (daveholtz/moltbook_scraper analysis/R/02_structural.R 150-173): an edge from each
    comment's author to the author of what it replies to (the parent comment, else the post); self-replies dropped,
    repeated edges once. `authors[i]` wrote item i, `parents[i]` is the item it replies to (< 0: a post)."""
    a = np.asarray(authors, dtype=np.int64)
    p = np.asarray(parents, dtype=np.int64)
    comments = np.flatnonzero(p >= 0)
    source, target = a[comments], a[p[comments]]
    keep = source != target
    return set(zip(source[keep].tolist(), target[keep].tolist()))


def edge_reciprocity(edges: set[tuple[int, int]]) -> Optional[float]:
    """Share of directed edges whose reverse is also an edge (igraph's `reciprocity(g)`, default mode, as
    analysis/R/02_structural.R 188 calls it); None without edges."""
    if not edges:
        return None
    return sum((v, u) in edges for u, v in edges) / len(edges)


def template_convergence(texts: Sequence[str]) -> Optional[float]:
    """Mean pairwise cosine similarity of the texts' bag-of-words vectors (1 = all the same words).

    Computed without forming pairs: with unit vectors u_i, sum_{i!=j} u_i.u_j = |sum u_i|^2 - P.
    Texts without words are left out; None for fewer than two texts.
    """
    total: dict[str, float] = {}
    p = 0
    for t in texts:
        counts = Counter(_WORD.findall(t.lower()))
        if not counts:
            continue
        p += 1
        norm = math.sqrt(sum(c * c for c in counts.values()))
        for w, c in counts.items():
            total[w] = total.get(w, 0.0) + c / norm
    if p < 2:
        return None
    return float((sum(v * v for v in total.values()) - p) / (p * (p - 1)))


# ----- opinions -------------------------------------------------------------------------------------
def bimodality_coefficient(x: Sequence[float] | np.ndarray) -> Optional[float]:
    """Sarle's bimodality coefficient (g^2 + 1) / (k + 3(n-1)^2 / ((n-2)(n-3))), g skewness, k excess kurtosis.

    Uses the sample (bias-corrected) skewness and kurtosis; > 5/9 (the uniform's value)
    suggests bimodality; two equal point masses give ~1. None for n < 4 or zero variance.
    """
    x = np.asarray(x, dtype=float)
    n = x.size
    if n < 4:
        return None
    d = x - x.mean()
    m2, m3, m4 = (d ** 2).mean(), (d ** 3).mean(), (d ** 4).mean()
    if m2 <= 1e-15:
        return None
    g1 = m3 / m2 ** 1.5
    k1 = m4 / m2 ** 2 - 3.0
    g = g1 * math.sqrt(n * (n - 1)) / (n - 2)
    k = (n - 1) / ((n - 2) * (n - 3)) * ((n + 1) * k1 + 6)
    return float((g * g + 1) / (k + 3 * (n - 1) ** 2 / ((n - 2) * (n - 3))))


def opinion_clusters(x: Sequence[float] | np.ndarray, gap: float = 0.05, min_share: float = 0.01) -> int:
    """Number of opinion clusters holding at least `min_share` of agents.

    Clusters are the maximal runs of sorted opinions whose consecutive gaps are at most
    `gap` (single linkage); runs smaller than ceil(min_share * n) are not counted.
    """
    x = np.sort(np.asarray(x, dtype=float))
    if x.size == 0:
        return 0
    cuts = np.flatnonzero(np.diff(x) > gap)
    sizes = np.diff(np.concatenate([[0], cuts + 1, [x.size]]))
    return int((sizes >= max(1, math.ceil(min_share * x.size))).sum())


def opinion_groups(x: Sequence[float] | np.ndarray, gap: float, width: float, major_share: float = 0.1) -> dict[str, float]:
    """Opinion clusters as the bounded-confidence literature reports them (Deffuant et al. 2000; Lorenz 2007).

    Sorted opinions are split where neighbours lie more than `gap` apart (single linkage). A group is a *formed*
    cluster when its whole range is at most `width` (the confidence bound: every member within reach of every
    other) and it has two members or more. Formed clusters holding at least `major_share` of the members are
    major, the others minor; members outside every formed cluster (singletons, and spreads wider than `width`
    that have not contracted into clusters) are unclustered. So 500 opinions still spread over [0, 1] are 0
    clusters with everyone unclustered, not one consensus cluster.

    Returns {"major": n, "minor": n, "unclustered_share": share of members}.
    """
    x = np.sort(np.asarray(x, dtype=float))
    n = x.size
    if n == 0:
        return {"major": 0.0, "minor": 0.0, "unclustered_share": 0.0}
    cuts = np.flatnonzero(np.diff(x) > gap)
    starts = np.concatenate([[0], cuts + 1])
    ends = np.concatenate([cuts + 1, [n]])
    sizes = ends - starts
    spans = x[ends - 1] - x[starts]
    formed = (sizes >= 2) & (spans <= width + 1e-12)
    major = formed & (sizes >= major_share * n)
    return {"major": float(major.sum()), "minor": float((formed & ~major).sum()),
            "unclustered_share": float(sizes[~formed].sum() / n)}


def like_minded_share(reader_opinions: np.ndarray, stances: np.ndarray, threshold: float) -> Optional[float]:
    """Echo-chamber index: share of exposures (reader, item) whose stance is within `threshold` of the reader.

    `stances` is readers x feed slots with NaN for empty slots; each exposure counts once.
    None when nothing was seen.
    """
    s = np.asarray(stances, dtype=float)
    seen = ~np.isnan(s)
    if not seen.any():
        return None
    close = np.abs(s - np.asarray(reader_opinions, dtype=float)[:, None]) <= threshold
    return float((close & seen).sum() / seen.sum())


def rate(hits: float, trials: float) -> Optional[float]:
    """hits / trials, None without trials."""
    return hits / trials if trials else None


def cluster_figures(x: Sequence[float] | np.ndarray, gap: float, width: float) -> dict[str, float]:
    """The opinion-cluster metrics of `opinion_groups`: major and minor clusters, and the share in none."""
    groups = opinion_groups(x, gap, width)
    return {"opinion_clusters": groups["major"], "opinion_minor_clusters": groups["minor"],
            "opinion_unclustered_share": groups["unclustered_share"]}
