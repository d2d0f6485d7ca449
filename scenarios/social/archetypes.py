"""How the social network buckets its LLM members' requests under `llm.archetypes` (agents.llm.archetypes).

- choose: the persona, the member's stance (its opinion as the prompt words it: one of the five stance labels) and
  the forum of the feed's top item (each member draws from the bucket's distribution over the answers its own feed
  allows: agents.llm.archetypes);
- write: the persona, the stance, post or comment, and the forum;
- stance (persona-free): the message read back, so equal messages are read once.

The opinion is binned as the prompt shows it (`templates.stance_words`), not finer: every member of a bucket is
told the stance its representative was told (a bin in tenths would straddle two labels), and there are fewer
buckets (calls scale with them: docs/archetypes.md). The key reads the request's observation only, never its text,
so a member's prompt is rendered only when it is its bucket's first (`SocietyModel.deferred`).
"""

from __future__ import annotations

from collections.abc import Hashable

from scenarios.social import templates as tpl
from sim.core.contracts import DecisionRequest


def _stance(x: object) -> object:
    return tpl.stance_words(float(x)) if isinstance(x, (int, float)) else x


def archetype(request: DecisionRequest) -> Hashable:
    """A member's request's bucket key, by phase (see the module's docstring)."""
    obs = request.observation
    if request.phase == "choose":
        return (request.persona, _stance(obs.get("opinion")), obs.get("feed_forum"))
    if request.phase == "write":
        return (request.persona, _stance(obs.get("opinion")), obs.get("kind"), obs.get("forum"))
    return obs.get("message")
