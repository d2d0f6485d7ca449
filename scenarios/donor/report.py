"""What the donor game reports: each round's figures and the run's (Vallinder & Hughes's score per generation,
donation and punishment), with their meaning and units, computed from the model's state."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from scenarios.donor.model import DonorModel

TICK_METRIC_DOCS = {
    "generation": "generation being played (1-based)",
    "game": "game of the generation (1 or 2)",
    "round": "round of the game (1-based)",
    "mean_resources": "mean resources of the players after this round",
    "donation_rate": "mean share of their resources the donors gave this round (a punishment counts as 0)",
    "units_given": "units the donors gave this round (before the multiplier)",
    "punishments": "donors who punished instead of giving this round",
}
FINAL_METRIC_DOCS = {
    "avg_final_resources": "mean over the last generation's players of their final resources averaged over the games they finished (the paper's score); null if no game finished",
    "generations_played": "generations with at least one finished game",
    "avg_final_resources_gen_G": "avg_final_resources of generation G (one key per generation played, G = 1, 2, ...)",
    "donation_rate": "mean share of resources given per donor decision over the run (a punishment counts as 0)",
    "punishment_share": "share of donor decisions that were punishments",
    "donation_trend": "least-squares slope of each generation's donation rate against the generation number; null with fewer than two generations",
}
COMPONENT_DOCS = {
    "given": "units the player gave this round (its cost of cooperating)",
    "received": "units the player received this round (the multiplied gifts of its donors)",
    "reputation": "the share of its resources the player gave in its latest action, what its next partner's trace "
                  "starts with (0 after a punishment; absent before its first action)",
}
UNITS = {"mean_resources": "units", "units_given": "units", "donation_rate": "share", "punishments": "donors",
         # an agent's payoff and its donation (the app's axes)
         "payoff": "units", "action.donate": "% of resources"}
CLOCK_METRICS = frozenset({"generation", "game", "round"})


def round_metrics(model: "DonorModel") -> dict[str, float]:
    """This round's figures."""
    res = [a.resources for a in model.agents]
    n = len(model.round_given)
    return {
        "generation": float(model.generation),
        "game": float(model.game),
        "round": float(model.round),
        "mean_resources": sum(res) / len(res),
        "donation_rate": sum(model.round_given) / n if n else 0.0,
        "units_given": model.round_units,
        "punishments": float(model.round_punish),
    }


def run_metrics(model: "DonorModel") -> dict[str, Optional[float]]:
    """The paper's score per generation, and donation and punishment over the run."""
    out: dict[str, Optional[float]] = {}
    done = sorted(model.gen_resources)
    out["avg_final_resources"] = model.gen_resources[done[-1]] if done else None
    out["generations_played"] = float(len(done))
    for g in done:
        out[f"avg_final_resources_gen_{g}"] = model.gen_resources[g]
    out["donation_rate"] = model.shares_given / model.decisions if model.decisions else None
    out["punishment_share"] = model.punishments / model.decisions if model.decisions else None
    rates = [(g, s / n) for g, (s, n) in sorted(model.gen_given.items()) if n]
    out["donation_trend"] = slope(rates)
    return out


def slope(points: Sequence[tuple[float, float]]) -> Optional[float]:
    """Least-squares slope of y on x; None with fewer than two distinct x."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx
