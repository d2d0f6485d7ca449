"""The donor game's validity probe: does a donation respond to the recipient's reputation (indirect reciprocity)?

The gift is asked in the same space at every level (0 to 100% of the donor's resources, or 0 to its resources in
units under Vallinder & Hughes's prompts, which the recipient's past gift does not change), so a donor blind to
the reputation gives the same share at every level. Negative control: a donor that gives 10% whatever the
recipient did; positive control: one that gives the share the recipient gave.
"""

from __future__ import annotations

from typing import Any, Optional

from sim.core.contracts import DecisionRequest
from sim.core.errors import UsageError
from scenarios.donor import templates as tpl
from scenarios.donor.strategies import gift
from sim.tick.probe import Control, Probe, enter_first_tick


def _share(value: Any, request: DecisionRequest) -> float:
    """The share of its resources a donor's answer gives (a percent, or units: `in_units`)."""
    o = request.observation
    if o.get("in_units"):
        return float(value) / o["resources"] if o["resources"] > 0 else 0.0
    return float(value) / 100.0


def _recipient_gave(model: Any, level: float) -> Optional[DecisionRequest]:
    """Round 1 of game 1: the lowest-id donor's recipient is shown having given `level` of its resources to a
    third player (its only trace step); the donor's donate request. The LLM donors' strategy-writing step is
    skipped: the probe asks about one decision."""
    if len(model.agents) < 3:
        raise UsageError("the donor probe needs at least 3 players (a donor, its recipient and the one the recipient "
                         f"gave to); agents={len(model.agents)}")
    enter_first_tick(model)
    donor = min((a for a in model.agents if a.unique_id in model.pairs), key=lambda a: a.unique_id)
    recipient = model.pairs[donor.unique_id]
    third = min(a.unique_id for a in model.agents if a.unique_id not in (donor.unique_id, recipient.unique_id))
    recipient.actions.clear()
    recipient.actions.append((0, "give", float(level), float(level) * model.config.endowment, third))
    return model.observe(donor, "donate")


GIFT_BY_REPUTATION = Probe(
    name="gift_by_reputation", variable="share the recipient gave last", levels=(0.0, 0.25, 0.5),
    response="share of resources given",
    finding="donors give more to recipients who gave (Vallinder & Hughes 2024: indirect reciprocity)",
    situate=_recipient_gave, measure=_share,
    blind=Control("gives 10% whatever the recipient gave", lambda request, rng: gift(request.observation, 0.1)),
    follows=Control("gives the share the recipient gave in its last gift",
                    lambda request, rng: gift(request.observation, request.observation["last_gift"] or 0.0)),
    unforced="the gift is asked from nothing to all of the donor's resources at every level, and the donor's resources do "
             "not change with what its recipient gave: a gift that ignores the reputation reads the same at every level",
    config={"punishment": False},
    questions={"donate": (
        tpl.QUESTIONS["give"].template,
        "What share of your resources, in percent, do you give to player $recipient?",
        "How many percent of your resources will you donate to player $recipient?",
        "Player $recipient is your recipient: what percentage of your resources do you give?",
        "Decide your gift to player $recipient, as a percent of your resources.",
        "What percentage of your resources goes to player $recipient?",
    )},
    facts=lambda model, request: {"recipient": request.observation["recipient"]},
)

PROBES = (GIFT_BY_REPUTATION,)
