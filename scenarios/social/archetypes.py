"""How the social network buckets its LLM members' requests under `llm.archetypes` (agents.llm.archetypes).

- choose: the persona, the opinion in tenths and the forum of the feed's top item (each member draws from the
  bucket's distribution over the answers its own feed allows: agents.llm.archetypes);
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
        return (request.persona, _tenth(obs.get("opinion")), obs.get("feed_forum"))
    if request.phase == "write":
        return (request.persona, _tenth(obs.get("opinion")), obs.get("kind"), obs.get("forum"))
    return (request.context, request.question)
