"""What the reward layer adds to every scenario's metrics, and the one place metric documentation is merged.

Every scenario documents its own per-tick and final metrics (`tick_metric_docs`,
`final_metric_docs`); the tick adds the Perolat four and the norm counts to both. `metric_docs`
merges them, for `societas scenarios`, `show`, the docs and the app alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: metrics the base adds to every scenario's tick, and what they mean
BASE_TICK_DOCS: dict[str, str] = {
    "perolat_efficiency": "Perolat U so far: sum of all material payoffs / ticks elapsed (runs before contract 6: shaped rewards)",
    "perolat_equality": "Perolat E so far: 1 - Gini of the agents' summed payoffs",
    "perolat_sustainability": "Perolat S so far: mean tick (1-based) at which agents got positive payoffs",
    "perolat_peace": "Perolat P so far: mean number of agents not sanctioned per tick",
    "norm_statements": "norms stated this tick",
    "norm_adoptions": "norms put in force this tick (e.g. by a vote)",
    "norm_compliances": "norm compliances recorded this tick",
    "norm_violations": "norm violations recorded this tick",
    "norm_sanctions": "sanctions given this tick",
}
#: metrics the base adds to every run's final summary
BASE_FINAL_DOCS: dict[str, str] = {
    "perolat_efficiency": "Perolat U (2017): sum of all agents' material payoffs over the run / ticks (runs before contract 6: shaped rewards)",
    "perolat_equality": "Perolat E: 1 - Gini of the agents' total payoffs",
    "perolat_sustainability": "Perolat S: mean over agents of the average tick (1-based) of their positive payoffs",
    "perolat_peace": "Perolat P: mean number of agents not sanctioned per tick",
    "norm_statements": "norms stated over the whole run",
    "norm_adoptions": "norms put in force over the whole run",
    "norm_compliances": "norm compliances over the whole run",
    "norm_violations": "norm violations over the whole run",
    "norm_sanctions": "sanctions over the whole run",
    "norm_compliance_rate": "compliances / (compliances + violations) over the run; null when no act was judged",
}


def metric_docs(tick_docs: Mapping[str, str], final_docs: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """{"tick": per-tick metric -> meaning, "final": final metric -> meaning}: a scenario's own, then the base's."""
    return {"tick": {**dict(tick_docs), **BASE_TICK_DOCS}, "final": {**dict(final_docs), **BASE_FINAL_DOCS}}


def scenario_metric_docs(cls: Any) -> dict[str, dict[str, str]]:
    """`metric_docs` of a scenario class (or of None, for a run whose scenario cannot be loaded: the base's only)."""
    return metric_docs(getattr(cls, "tick_metric_docs", {}) or {}, getattr(cls, "final_metric_docs", {}) or {})
