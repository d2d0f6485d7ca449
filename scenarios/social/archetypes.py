"""How the social network buckets its LLM members' requests under `llm.archetypes` (agents.llm.archetypes).

- choose: the persona, the opinion in tenths, the forum of the feed's top item and how the member's last post
  fared (the action space, so the feed's length and what the member follows and has voted on, is part of every
  bucket);
- write: the persona, the opinion in tenths, post or comment, and the forum;
- stance (persona-free): the message read back, so equal messages are read once.
"""

from __future__ import annotations

from collections.abc import Hashable

from sim.core.contracts import DecisionRequest


def _tenth(x: object) -> object:
    return round(float(x), 1) if isinstance(x, (int, float)) else x


def archetype(request: DecisionRequest) -> Hashable:
    """A member's request's bucket key, by phase (see the module's docstring)."""
    obs = request.observation
    if request.phase == "choose":
        return (request.persona, _tenth(obs.get("opinion")), obs.get("feed_forum"), obs.get("last_post"))
    if request.phase == "write":
        return (request.persona, _tenth(obs.get("opinion")), obs.get("kind"), obs.get("forum"))
    return (request.context, request.question)
