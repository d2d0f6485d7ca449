"""What the fishery reports: each month's figures and GovSim's table over the run (Piatti et al. 2024), with
their meaning and units. Computed from the model's state; the run's edition says how the figures that changed
between decision contracts are defined (over-usage, efficiency over the months survived)."""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Optional

from scenarios.commons.lake import sustainable_catch
from sim.reward.metrics import equality

if TYPE_CHECKING:
    from scenarios.commons.model import CommonsModel

TICK_METRIC_DOCS = {
    "stock": "tons in the lake after this month's fishing (before regrowth)",
    "stock_start": "tons in the lake at the start of this month",
    "catch_total": "tons caught by all fishers this month",
    "catch_mean": "tons caught per fisher this month",
    "over_usage": "share of this month's catch decisions (the catch chosen, before rationing) above the sustainable "
                  "share stock_start*(1-1/regrowth)/N (runs before contract 6: the landed catch)",
    "gain_so_far": "mean total catch per fisher up to this month",
}
FINAL_METRIC_DOCS = {
    "survival_time": "months harvested, the collapse month counted (GovSim)",
    "collapsed": "1 if the lake collapsed, else 0",
    "gain": "mean total catch per fisher over the run (GovSim)",
    "total_gain": "total catch of all fishers over the run",
    "efficiency": "total catch / (months x capacity x (1 - 1/regrowth)), the horizon's sustainable maximum (GovSim)",
    "efficiency_survived": "total catch / (months survived x capacity x (1 - 1/regrowth)); above 1 = caught faster "
                           "than the lake regrows (runs before contract 6: capped at 1)",
    "equality": "1 - Gini of the fishers' total catches (GovSim)",
    "over_usage": "share of all catch decisions above the month's sustainable share (GovSim)",
    "stock_final": "tons in the lake at the end",
    "norm_limit_final": "the catch limit in force at the end (norm formation: the last adopted; else the last month's norm); null if none",
    "sanction_fines_total": "fines paid by sanctioned fishers over the run (graduated: sanction_fine x (1 + sanction_growth x earlier violations))",
    "monitoring_cost_total": "monitoring costs paid by all fishers over the run (monitoring_cost per fisher per month with a norm in force and sanctions on)",
}
COMPONENT_DOCS = {
    "catch": "tons the fisher caught this month (its payoff before costs and fines)",
    "stock_change": "the lake's change this month in tons, regrowth and every catch included (the same for every fisher "
                    "taking part): the group's stock change",
}
UNITS = {"stock": "tons", "stock_start": "tons", "catch_total": "tons", "catch_mean": "tons",
         "gain_so_far": "tons", "over_usage": "share", "state.stock": "tons", "state.stock_start": "tons",
         "state.norm": "tons", "state.strategies.*": "fishers",
         # final metrics, an agent's payoff and its numeric action (the app's axes)
         "gain": "tons", "total_gain": "tons", "survival_time": "months", "payoff": "tons", "action.harvest": "tons"}
_catch, _gain = attrgetter("catch"), attrgetter("gain")


def month_metrics(model: "CommonsModel") -> dict[str, float]:
    """This month's figures, and the GovSim figures so far (named `*_so_far`), over the fishers taking part."""
    fishers = model.present_fishers()
    catches = list(map(_catch, fishers))
    total_gain = sum(map(_gain, fishers))
    return {
        "stock": model.stock,
        "stock_start": model.stock_start,
        "catch_total": sum(catches),
        "catch_mean": sum(catches) / len(catches),
        # GovSim's over-usage judges the catch a fisher chose (rationing is the lake's doing), each month as over the run
        "over_usage": model.edition.over_usage(model, catches),
        "gain_so_far": total_gain / len(catches),
    }


def chosen_over_usage(model: "CommonsModel", catches: list[float]) -> float:
    """The share of this month's catch decisions (the catch chosen, before rationing) above the sustainable share."""
    return model.month_over / model.month_actions if model.month_actions else 0.0


def run_metrics(model: "CommonsModel") -> dict[str, Optional[float]]:
    """GovSim's table over the whole run (Piatti et al. 2024)."""
    c = model.config
    gains = [f.gain for f in model.agents]
    total = sum(gains)
    reference = model.tick * c.capacity * (1 - 1 / c.regrowth)
    return {
        "survival_time": float(model.tick),
        "collapsed": float(model.status == "collapsed"),
        "gain": total / len(gains),
        "total_gain": total,
        "efficiency": min(1.0, total / (c.months * c.capacity * (1 - 1 / c.regrowth))),
        "efficiency_survived": model.edition.efficiency_survived(total, reference) if reference > 0 else 0.0,
        "equality": equality(gains),
        "over_usage": model.over_actions / model.actions if model.actions else 0.0,
        "stock_final": model.stock,
        "norm_limit_final": model.norm_in_force if c.norm_formation else model.norm,
        "sanction_fines_total": model.fines_total,
        "monitoring_cost_total": model.monitoring_total,
    }


def uncapped_efficiency(total: float, reference: float) -> float:
    """The efficiency over the months survived: above 1, the fishers caught faster than the lake regrows (a collapsing
    run), which a cap at 1 would hide."""
    return total / reference


def usage_limit(regrowth: float, state: Mapping[str, Any], agents: int) -> Optional[float]:
    """GovSim's sustainable share of a stored tick (`state["stock_start"]`): a catch above it is over-usage."""
    start = (state or {}).get("stock_start")
    if start is None or agents < 1:
        return None
    return sustainable_catch(float(start), regrowth, agents)


def reference_lines(capacity: float, regrowth: float, collapse: float) -> dict[str, list[tuple[float, str]]]:
    """The stock's collapse threshold and the level from which the lake regrows to capacity in one month."""
    lines = [(collapse, "collapse"), (capacity / regrowth, "sustainable: regrows to capacity")]
    return {"stock": lines, "state.stock": lines}
