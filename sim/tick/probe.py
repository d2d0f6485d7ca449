"""Validity probes: does a decision respond to the variable a paper's finding depends on?

A probe is a set of matched counterfactual decision requests. For each seed it builds a fresh model
at its first tick, puts the world at one level of one variable (the lake's stock, the recipient's
last gift, a price, a post's distance from the reader's opinion) and asks the scenario's own
`observe` for the request; the requests of one seed differ only in that variable (same agent, same
decision seed, same everything else). They are answered by the backends a study would use, and
the response is measured from each decision. `sim.runner.probing` runs them and reports the
effect with an interval; a scenario declares its probes as `probes = (Probe(...), ...)`.

To add one: write `situate(model, level) -> DecisionRequest | None` that changes the world of a
model at its first tick (`enter_first_tick` has run) and returns `model.observe(agent, phase)` for
one agent, and `measure(value, request) -> float`; list the levels from low to high. The probe's
effect is the mean response at the last level minus the mean at the first, paired by seed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional

from sim.core.contracts import DecisionRequest

if TYPE_CHECKING:  # (type hints only: the model imports this module)
    from sim.tick.model import SocietyModel


@dataclass(frozen=True)
class Probe:
    """Matched requests that differ in one variable, and how to read the decision's response."""

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
    #: config fields the probe needs (over the user's config), e.g. {"talk": False}
    config: Mapping[str, Any] = field(default_factory=dict)


def enter_first_tick(model: "SocietyModel") -> None:
    """Bring a freshly built model to the start of its first tick (Mesa's step counter at 1, `update` done),
    where its `observe` gives the requests of tick 1."""
    model.steps = 1
    model.events = []
    model.update()
