"""The community's validity probe: does an upvote respond to how far a post is from the reader's opinion
(bounded confidence, Deffuant et al. 2000)?

The reader's feed holds one post, and its actions are the same at every level (post, comment, vote on,
follow the one item, or idle), so a reader blind to the post's stance acts the same at every level.
Negative control: upvotes the post whatever it says; positive control: upvotes a post within 0.4 of its
opinion (half the largest distance probed) and idles otherwise.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from scenarios.social import templates as tpl
from sim.core.contracts import DecisionRequest
from sim.tick.probe import Control, Probe, enter_first_tick

#: the reader's opinion; the post sits `level` below it
OPINION = 0.9
LEVELS = (0.0, 0.4, 0.8)
#: the positive control's confidence bound: half the largest distance probed
BOUND = max(LEVELS) / 2


def _post_at_distance(model: Any, level: float) -> Optional[DecisionRequest]:
    """Tick 1: member 0 (opinion 0.9) reads a feed of one post by member 1 whose stance is 0.9 - `level`, its
    text saying that stance; member 0's choose request."""
    enter_first_tick(model)
    reader = min(model.agents, key=lambda a: a.unique_id)
    author = min((a for a in model.agents if a is not reader), key=lambda a: a.unique_id)
    stance = OPINION - float(level)
    model.opinion[reader.idx] = OPINION
    text = f"{model.config.topic} My answer: I am {tpl.stance_words(stance)}."
    item = model.items.add(author.idx, model.tick, 0, stance, -1, text)
    model.row[:] = -1
    model.row[reader.idx] = 0
    model.n_feed, model.feed_list, model.stance_list = [1], [[item]], [[stance]]
    model.followed_list, model.interest_list = [[False]], [[1.0]]
    model.feed_followed = np.zeros((1, 1), dtype=bool)
    return model.observe(reader, "choose")


def _within(request: DecisionRequest, rng: Any) -> str:
    o = request.observation
    return "upvote 1" if abs(o["stances"][0] - o["opinion"]) < BOUND else "idle"


UPVOTE_BY_DISTANCE = Probe(
    name="upvote_by_distance", variable="distance of the post's stance from the reader's opinion",
    levels=LEVELS, response="upvoted the post (0/1)",
    finding="members endorse what lies within their confidence bound (bounded confidence: epsilon)",
    situate=_post_at_distance, measure=lambda value, request: 1.0 if value == "upvote 1" else 0.0,
    blind=Control("upvotes the post whatever its stance", lambda request, rng: "upvote 1"),
    follows=Control(f"upvotes a post within {BOUND:g} of its opinion, else idles", _within),
    unforced="the reader's actions are the same at every level (post, comment on, vote on or follow the one item, or "
             "idle): an action that ignores the stance reads the same at every level",
    rate=True,
    questions={"choose": (
        tpl.CHOOSE,
        "What is your next action? " + tpl.CHOOSE.split("? ", 1)[1],
        "Choose what to do now. " + tpl.CHOOSE.split("? ", 1)[1],
        "What will you do next? " + tpl.CHOOSE.split("? ", 1)[1],
        "Decide your action for now. " + tpl.CHOOSE.split("? ", 1)[1],
        "Which action do you take now? " + tpl.CHOOSE.split("? ", 1)[1],
    )},
)

PROBES = (UPVOTE_BY_DISTANCE,)
