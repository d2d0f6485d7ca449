"""Scripted donors: fixed fraction, defector, image scoring, punisher, random.

Each strategy reads only the request's observation: its own inherited parameters (`fraction`,
`threshold`, `punish_fraction`) and the recipient's reputation (`last_gift`: the share of its
resources the recipient gave in its last gift, punishments skipped; None if it has not given
yet or `trace_depth` is 0). Gifts are whole percents of the donor's resources, or units where the request asks
in units (`in_units`: Vallinder & Hughes's prompts).

Each answers a whole RequestBatch of the action and donate phases in columns (`@answers_many`, sim.contracts.strategy):
the donors' parameters, modes and recipients' last gifts as arrays (`DonorModel.observe_batch`), `random`'s
percents drawn from the request seeds at once; equal to asking them one by one.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, Optional

import numpy as np

from sim.contracts.strategy import answers_many
from sim.core.contracts import DecisionRequest
from sim.core.rng import randbelow_array

STRATEGY_TEXT = {
    "fixed": "I always give the same share of my resources.",
    "defector": "I never give anything.",
    "image": "I give to players whose last gift was generous, and nothing to the others.",
    "punisher": "I give to generous players and punish the stingy ones.",
    "random": "I give a random share.",
}


def percent(fraction: float) -> float:
    """A share of resources as the whole percent the action space takes."""
    return float(round(100 * fraction))


def gift(obs: Mapping[str, Any], share: float) -> float:
    """A gift of `share` of the donor's resources as the request asks it: a whole percent, or units (`in_units`)."""
    if obs.get("in_units"):
        return min(round(share * obs["resources"], 2), round(obs["resources"], 2))
    return percent(share)


def stingy(obs: Mapping[str, Any]) -> bool:
    """The recipient's last gift was below this donor's threshold."""
    last = obs.get("last_gift")
    return last is not None and last < obs["threshold"] - 1e-9


def _strategy(name: str) -> Callable[[DecisionRequest, random.Random], Any]:
    def decide(request: DecisionRequest, rng: random.Random) -> Any:
        o = request.observation
        if request.phase == "strategy":
            return STRATEGY_TEXT[name]
        if request.phase == "action":
            return "punish" if name == "punisher" and stingy(o) else "give"
        if request.phase != "donate":
            raise ValueError(f"strategy {name!r} has no answer for phase {request.phase!r}")
        if o.get("action") == "punish":
            return percent(o["punish_fraction"])
        if name == "fixed":
            return gift(o, o["fraction"])
        if name == "defector":
            return 0.0
        if name in ("image", "punisher"):
            return 0.0 if stingy(o) else gift(o, o["fraction"])
        return gift(o, rng.randint(0, 100) / 100)

    decide.__name__ = name
    return answers_many(_columns(name))(decide)


def _columns(name: str) -> Callable[[Mapping[str, Any], str, np.ndarray], Optional[list]]:
    """`name`'s answers to a batch of donors at once, from the batch's columns (None: asked one by one)."""

    def many(obs: Mapping[str, Any], phase: str, seeds: np.ndarray) -> Optional[list]:
        if phase not in ("action", "donate") or obs.get("in_units") or not isinstance(obs.get("fraction"), np.ndarray):
            return None
        last, threshold = obs["last_gift"], obs["threshold"]
        stingy = last < threshold - 1e-9  # (NaN, no gift seen: never stingy)
        if phase == "action":
            return np.where(stingy, "punish", "give").tolist() if name == "punisher" else ["give"] * len(seeds)
        if name == "defector":
            shares = np.zeros(len(seeds))
        elif name == "random":
            shares = np.round(100 * (randbelow_array(seeds, 101).astype(np.float64) / 100))
        else:
            shares = np.round(100 * obs["fraction"])
            if name != "fixed":
                shares = np.where(stingy, 0.0, shares)
        return np.where(obs["action"] == "punish", np.round(100 * obs["punish_fraction"]), shares).tolist()

    return many


STRATEGIES = {name: _strategy(name) for name in STRATEGY_TEXT}
