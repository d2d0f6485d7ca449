"""Scripted fishers: sustainable, greedy, fixed, random, conditional.

Each strategy answers every phase of the fishery (talk, propose, vote, harvest, sanction, the
conversation's rounds, GovSim's reading of the agreed limit; reflection and GovSim's thoughts are the LLM
fishers' own)
from the request's observation alone. A fisher proposes the limit its strategy would catch
(or, once, a belief copied from a peer by social learning) and votes for the proposal
closest to its own.

The strategies answer a harvest RequestBatch in columns (sim.contracts.strategy): those that never draw
read the observation alone (`@observation_only`), and `random` draws every fisher's catch at once
from the request seeds (`@answers_many`), equal to its one-by-one draws.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import numpy as np

from sim.contracts.strategy import answers_many, observation_only
from scenarios.commons.govsim import majority_reading
from sim.core.contracts import DecisionRequest
from sim.core.rng import randbelow_array, randbelow_many

Intent = Callable[[dict, random.Random], float]


def sustainable_share(obs: dict) -> float:
    """Each fisher's share of the catch that leaves the stock no smaller after regrowth."""
    return math.floor(obs["stock"] * (1 - 1 / obs["regrowth"]) / obs["fishers"])


def _intents() -> dict[str, Intent]:
    return {
        "sustainable": lambda o, r: sustainable_share(o),
        "greedy": lambda o, r: math.floor(o["stock"] / o["fishers"]),
        "fixed": lambda o, r: o["catch"],
        "random": lambda o, r: r.randint(0, math.floor(o["stock"] / o["fishers"])),
        "conditional": lambda o, r: round(o["last_mean"]) if o.get("last_mean") is not None else sustainable_share(o),
    }


INTENTS = _intents()
PUNISHERS = {"sustainable", "conditional"}


def _strategy(name: str):
    intent = INTENTS[name]

    def decide(request: DecisionRequest, rng: random.Random):
        obs = request.observation
        if request.phase == "talk" or request.phase.startswith("converse"):
            if request.phase != "talk":  # after the harvest: the limit is for next month's lake, regrown
                obs = dict(obs, stock=min(obs["capacity"], obs["stock"] * obs["regrowth"]))
            amount = int(min(intent(obs, rng), obs["stock"]))
            return f"I plan to catch {amount} tons. I propose each of us catches at most {amount} tons."
        if request.phase == "reflect":  # (a scripted fisher is never asked; a stand-in for an LLM one may be)
            return "Catching the sustainable share keeps the lake and our income for the months to come."
        if request.phase in ("plan", "memorize"):  # GovSim's thoughts (the same: asked of LLM fishers only)
            return "The group talked about how much each of us should catch."
        if request.phase == "agree":  # GovSim's framework reading the chat, when its request goes to a scripted fisher
            return majority_reading(obs["stated"], obs["present"], obs["capacity"])
        if request.phase == "propose":  # (capped at the space's bound, which a run sets at the stock)
            if obs.get("copied"):
                return min(float(obs["belief"]), request.space.hi)
            return float(min(int(intent(obs, rng)), request.space.hi))
        if request.phase == "vote":
            options = obs["options"]
            if name == "random":
                return rng.choice(sorted(options))
            own = obs.get("own_proposal")
            own = float(intent(obs, rng)) if own is None else own
            return min(options, key=lambda k: (abs(options[k] - own), options[k]))
        if request.phase == "harvest":  # the intent, capped at the space's bound (in a run: the stock, floored)
            return min(float(intent(obs, rng)), request.space.hi)
        if request.phase == "sanction":
            options = list(request.space.options)
            if name == "random":
                return rng.choice(options)
            violators = obs.get("violators", {})
            if name in PUNISHERS and violators:
                worst = max(violators, key=lambda k: (violators[k], -int(k)))
                return f"fisher {worst}"
            return "none"
        raise ValueError(f"strategy {name!r} has no answer for phase {request.phase!r}")

    decide.__name__ = name
    if name == "random":
        return answers_many(_random_harvests)(decide)
    return observation_only(decide)  # no draw, nothing of the agent's own: one answer serves all


def _random_harvests(obs: dict, phase: str, seeds) -> list[float] | None:
    """`random`'s harvest for each request seed at once: randint(0, stock // fishers) as CounterRandom draws it."""
    if phase != "harvest":
        return None
    cap, top = math.floor(obs["stock"]), math.floor(obs["stock"] / obs["fishers"])
    if 0 <= top <= cap < 1 << 53:  # always, with fishers >= 1: min(float(x), cap) is float(x)
        return randbelow_array(seeds, top + 1).astype(np.float64).tolist()
    return [min(float(x), cap) for x in randbelow_many(seeds, top + 1)]


STRATEGIES = {name: _strategy(name) for name in INTENTS}
