"""Scripted members: each strategy answers both stages, choose (an action) and write (the text).

A strategy reads only the request's observation (plain data) and its seeded rng. The
observation of the choose stage holds the member's `opinion`, `epsilon` (agreement
threshold), `post_rate`, `reward_sensitivity`, `last_post` ("upvoted", "ignored" or None)
and the feed as parallel lists `stances`, `interest`, `followed`; options name feed items
1-based. The write stage's observation holds `kind` (post/comment), `forum`, `opinion` and,
for comments, `parent_stance`.

Scripted posts are an opener, a claim for the member's stance bucket and a reason drawn
from short fixed lists (templates.py), comments a (dis)agreement and a claim, so exact
duplicates and template convergence arise from the small phrase pool, as in MoltBook.

- `engaged`: posts with probability post_rate (x (1 + sensitivity) after an upvoted post,
  / (1 + sensitivity) after an ignored one); else picks a feed item weighted by interest and
  upvotes / comments on / follows it when it agrees (|stance - opinion| < epsilon), or
  downvotes / argues with / unfollows it when it does not.
- `lurker`: never writes; upvotes the first agreeable item, else idles.
- `broadcaster`: always posts the same greeting (the duplicated messages of MoltBook).
- `random`: a uniformly random valid action; random template text.
"""

from __future__ import annotations

import random
from string import Template

from sim.core.contracts import DecisionRequest
from scenarios.social import templates as tpl


def _post_probability(obs: dict) -> float:
    p = float(obs["post_rate"])
    k = 1.0 + float(obs["reward_sensitivity"])
    if obs.get("last_post") == "upvoted":
        p *= k
    elif obs.get("last_post") == "ignored":
        p /= k
    return min(1.0, p)


def _first(options: tuple[str, ...], *wanted: str) -> str:
    for w in wanted:
        if w in options:
            return w
    return "idle"


def _weighted(interest: list[float], rng: random.Random) -> int:
    """A feed position drawn with weight 0.1 + interest."""
    u = rng.random() * (0.1 * len(interest) + sum(interest))
    for k, w in enumerate(interest):
        u -= 0.1 + w
        if u < 0:
            return k
    return len(interest) - 1


def _engaged(request: DecisionRequest, rng: random.Random) -> str:
    obs, options = request.observation, request.space.options
    if rng.random() < _post_probability(obs):
        return "post"
    stances = obs["stances"]
    if not stances:
        return "idle"
    k = _weighted(obs["interest"], rng)
    agree = abs(stances[k] - obs["opinion"]) < obs["epsilon"]
    n, r = k + 1, rng.random()
    if agree:
        if r < 0.5:
            return _first(options, f"upvote {n}", f"comment {n}")
        if r < 0.8:
            return _first(options, f"comment {n}")
        return _first(options, f"follow {n}", f"upvote {n}")
    if r < 0.4:
        return _first(options, f"downvote {n}")
    if r < 0.7:
        return _first(options, f"comment {n}")
    return _first(options, f"unfollow {n}")


def _lurker(request: DecisionRequest, rng: random.Random) -> str:
    obs, options = request.observation, request.space.options
    for k, s in enumerate(obs["stances"]):
        if abs(s - obs["opinion"]) < obs["epsilon"] and f"upvote {k + 1}" in options:
            return f"upvote {k + 1}"
    return "idle"


def _broadcaster(request: DecisionRequest, rng: random.Random) -> str:
    return "post"


def _random(request: DecisionRequest, rng: random.Random) -> str:
    return rng.choice(request.space.options)


def _fill(text: str, forum: str) -> str:
    return Template(text).safe_substitute(forum=forum)


def write(request: DecisionRequest, rng: random.Random, style: str = "engaged") -> str:
    """A templated message: opener + claim by stance bucket for posts; a short (dis)agreement for comments."""
    obs = request.observation
    if style == "broadcaster" and obs["kind"] == "post":
        return tpl.BROADCAST.substitute(forum=obs["forum"])
    if obs["kind"] == "comment":
        side = "agree" if abs(obs["parent_stance"] - obs["opinion"]) < obs["epsilon"] else "disagree"
        claim = rng.choice(tpl.CLAIMS[tpl.stance_bucket(obs["opinion"])])
        return f"{rng.choice(tpl.REPLIES[side])} {claim[0].upper()}{claim[1:]}"
    opener = _fill(rng.choice(tpl.OPENERS), obs["forum"])
    return f"{opener} {rng.choice(tpl.CLAIMS[tpl.stance_bucket(obs['opinion'])])} {rng.choice(tpl.REASONS)}"


def _strategy(name: str, choose):
    def decide(request: DecisionRequest, rng: random.Random) -> str:
        if request.phase == "choose":
            return choose(request, rng)
        if request.phase == "write":
            return write(request, rng, name)
        raise ValueError(f"social strategy {name!r} has no answer for phase {request.phase!r}")

    decide.__name__ = name
    return decide


STRATEGIES = {
    "engaged": _strategy("engaged", _engaged),
    "lurker": _strategy("lurker", _lurker),
    "broadcaster": _strategy("broadcaster", _broadcaster),
    "random": _strategy("random", _random),
}
