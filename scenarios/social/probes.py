"""The community's validity probe: does an upvote respond to how far a post is from the reader's opinion
(bounded confidence, Deffuant et al. 2000)?"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from scenarios.social import templates as tpl
from sim.core.contracts import DecisionRequest
from sim.tick.probe import Probe, enter_first_tick

#: the reader's opinion; the post sits `level` below it
OPINION = 0.9


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


UPVOTE_BY_DISTANCE = Probe(
    name="upvote_by_distance", variable="distance of the post's stance from the reader's opinion",
    levels=(0.0, 0.4, 0.8), response="upvoted the post (0/1)",
    finding="members endorse what lies within their confidence bound (bounded confidence: epsilon)",
    situate=_post_at_distance, measure=lambda value, request: 1.0 if value == "upvote 1" else 0.0,
)

PROBES = (UPVOTE_BY_DISTANCE,)
