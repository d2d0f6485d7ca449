"""Validity probes: does a decision respond to the variable a paper's finding depends on?

A probe is a set of matched counterfactual decision requests. For each seed it builds a fresh model
at its first tick, puts the world at one level of one variable (the lake's stock, the recipient's
last gift, a price, a post's distance from the reader's opinion, the apples left) and asks the
scenario's own `observe` for the request; the requests of one seed differ only in that variable (same
agent, same decision seed, same action space, same everything else). They are answered by the
backends a study would use, and the response is measured from each decision. `runner.probing`
runs them and reports the effect with an interval; a scenario declares its probes as
`probes = (Probe(...), ...)`.

A probe is an instrument, so it ships its controls beside it (as PettingZoo ships its API tests):
`blind`, a scripted policy that ignores the variable, must read "does not respond", and `follows`, one
that follows it, must read "responds". Both answer the very requests the probed policy answers, every
time the probe runs; `societas.testing.check_probes` runs them on a scenario's every probe. The response
must be one the request's bounds cannot force: the action space is the same at every level (the
runner checks it), so a policy blind to the variable gives the same answer at every level.

To add one: write `situate(model, level) -> DecisionRequest | None` that changes the world of a model
at its first tick (the runner has called `enter_first_tick`) and returns `model.observe(agent, phase)`
for one agent, `measure(value, request) -> float`, and the two controls; list the levels from low to
high. The probe's effect is the mean response at the last level minus the mean at the first, paired by seed.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from sim.core.contracts import Decision, DecisionRequest

if TYPE_CHECKING:  # (type hints only: the model imports this module)
    from sim.tick.model import SocietyModel

#: a scripted policy: the strategy contract of agents.scripted, (request, rng) -> value
Policy = Callable[[DecisionRequest, random.Random], Any]


@dataclass(frozen=True)
class Control:
    """A scripted policy a probe must read as it says: `blind` ignores the variable, `follows` follows it."""

    #: what it does, in a few words ("catches 20 tons at any stock")
    does: str
    #: the policy itself, reading only the request's observation (and the rng, which a control should not need)
    decide: Policy


@dataclass(frozen=True)
class Prelude:
    """A decision the probed policy makes once per seed before its matched requests, in a model of its own:
    a synthesis policy writes the program that then answers every level (`ask` its request, `take` its
    answer into each level's fresh model, before `situate`). Its decisions are stored with the probe."""

    ask: Callable[["SocietyModel"], Optional[DecisionRequest]]
    take: Callable[["SocietyModel", Decision], None]


@dataclass(frozen=True)
class Probe:
    """Matched requests that differ in one variable, how to read the decision's response, and its controls."""

    #: short name, e.g. "catch_by_stock"
    name: str
    #: the variable changed, e.g. "stock"
    variable: str
    #: its levels, low to high (the effect is last minus first)
    levels: tuple[Any, ...]
    #: the response measured, e.g. "catch (tons)"
    response: str
    #: what the paper's finding needs, e.g. "catches fall as the stock falls (GovSim)"
    finding: str
    #: puts a model at its first tick at `level` and returns one agent's request (None: no request)
    situate: Callable[["SocietyModel", Any], Optional[DecisionRequest]]
    #: the response of a decision's value to that request
    measure: Callable[[Any, DecisionRequest], float]
    #: the negative control: a policy blind to the variable (must read "does not respond")
    blind: Control
    #: the positive control: a policy that follows the variable (must read "responds")
    follows: Control
    #: why the request's bounds cannot make the response move (docs/probes.md prints it)
    unforced: str
    #: config fields the probe needs (over the user's config), e.g. {"talk": False}
    config: Mapping[str, Any] = field(default_factory=dict)
    #: the response is 0 or 1 (chose, upvoted, beamed): its intervals are Wilson's and Newcombe's
    rate: bool = False
    #: per phase, the scenario's question and its rewordings that keep its facts (`string.Template` text over
    #: `facts`), for `--paraphrases` (runner.paraphrase): element 0 is the original, then one per rewording
    questions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: the facts a question names, read from the model and the request (e.g. {"recipient": 3})
    facts: Callable[["SocietyModel", DecisionRequest], Mapping[str, Any]] = lambda model, request: {}
    #: the policy's decision before the matched requests (a synthesised program), or None
    prelude: Optional[Prelude] = None
    #: the class a probe's worlds are built with, from the scenario's class and the config: a smaller world
    #: that gives the very same request (so a probe's cost does not grow with the population); None: the scenario's
    world: Optional[Callable[[type, Any], type]] = None


def enter_first_tick(model: "SocietyModel") -> None:
    """Bring a freshly built model to the start of its first tick (Mesa's step counter at 1, `update` done),
    where its `observe` gives the requests of tick 1. Calling it again on the same model does nothing."""
    if getattr(model, "_probe_entered", False):
        return
    model.steps = 1
    model.events = []
    model.update()
    model._probe_entered = True
