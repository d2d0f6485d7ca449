"""The community (scenarios/social) in plain Mesa: activity, ranked feeds, reading, one action per active member.

Each tick a member is active with its own rate; an active member's feed is the recommender's top items of the last
`feed_window` ticks (not its own); it reads them (Deffuant: it moves toward one item it read, within `epsilon`);
then it acts: `engaged` posts with its post rate (higher after an upvoted post, lower after an ignored one) or picks
an item by interest and upvotes, comments on or follows it when it agrees, downvotes, argues with or unfollows it
when it does not; `lurker` upvotes the first agreeable item; `broadcaster` posts. Posts and comments carry their
author's opinion and reach feeds from the next tick. A member is paid for the upvotes, downvotes and replies it
got. Reported each tick: members active, each action's count, follow edges, the opinions' mean.

The world's library code is the scenario's (the seeded follow graph, the items' arrays, the feed ranking, the
opinion update rule: what a Mesa user would import); the tick and the members' choices are written here. Its
draws come from the community's own generator in the engine's order, and `lurker` and `broadcaster` draw
nothing else, so a community of those reproduces the engine's run (`engaged` draws from the model's RNG).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import mesa
import numpy as np

from scenarios.social import feed as feeds
from scenarios.social import templates as tpl
from scenarios.social.graph import build_graph
from scenarios.social.items import Items
from scenarios.social.opinions import deffuant_read
from sim.core.rng import derive_seed

ACTIONS = ("posts", "comments", "upvotes", "downvotes", "follows", "unfollows", "idle")


class Member(mesa.Agent):
    """A member: its index into the community's arrays, its strategy, the post or comment it chose to write."""

    def __init__(self, model: "PlainSocial", idx: int, strategy: str) -> None:
        super().__init__(model)
        self.idx, self.strategy = idx, strategy
        self.feed: list[int] = []
        self.followed: list[bool] = []  # whether it followed each item's author when its feed was ranked
        self.writes: Optional[tuple[str, int]] = None

    def choose(self) -> None:
        m, i = self.model, self.idx
        items, feed, opinion = m.items, self.feed, float(m.opinion[i])
        stances = [float(items.stance[x]) for x in feed]
        agrees = [abs(s - opinion) < m.epsilon for s in stances]
        if self.strategy == "broadcaster":
            self.writes = ("post", m.post_forum[i])
            return
        if self.strategy == "lurker":
            k = next((k for k, ok in enumerate(agrees) if ok and (i, feed[k]) not in m.voted), None)
            m.apply(self, "upvote" if k is not None else "idle", k)
            return
        p = m.post_rate * (1 + m.sensitivity if m.outcome.get(i) == "upvoted" else
                           1 / (1 + m.sensitivity) if m.outcome.get(i) == "ignored" else 1)
        if m.random.random() < min(1.0, p):
            self.writes = ("post", m.post_forum[i])
            return
        if not feed:
            m.apply(self, "idle", None)
            return
        weights = [0.1 + m.interests[i, items.topic[x]] / m.interest_top[i] for x in feed]
        k = m.random.choices(range(len(feed)), weights)[0]
        voted, r = (i, feed[k]) in m.voted, m.random.random()
        if agrees[k]:
            verb = ("upvote" if not voted else "comment") if r < 0.5 else "comment" if r < 0.8 else \
                ("follow" if not self.followed[k] else "upvote" if not voted else "idle")
        else:
            verb = ("downvote" if not voted else "idle") if r < 0.4 else "comment" if r < 0.7 else \
                ("unfollow" if self.followed[k] else "idle")
        if verb == "comment":
            self.writes = ("comment", feed[k])
        else:
            m.apply(self, verb, k)


    def write(self) -> None:
        m, (kind, ref), i = self.model, self.writes, self.idx
        it = m.items
        if kind == "post":
            m.last_post[i] = it.add(i, m.steps, ref, float(m.opinion[i]), -1, tpl.BROADCAST.substitute(forum=tpl.FORUMS[ref]))
        else:
            it.add(i, m.steps, int(it.topic[ref]), float(m.opinion[i]), ref, "I agree.")
            m.paid[int(it.author[ref])] += 1
        m.counts["posts" if kind == "post" else "comments"] += 1


class PlainSocial(mesa.Model):
    """`n` members on a seeded follow graph."""

    def __init__(self, n: int, *, seed: int, strategies: Optional[list[str]] = None, feed_size: int = 10,
                 feed_window: int = 5, max_candidates: int = 2000, hot_decay: float = 3.0, epsilon: float = 0.2,
                 mu: float = 0.3, forums: int = 8, activity: float = 0.1, activity_skew: float = 1.0,
                 post_rate: float = 0.3, sensitivity: float = 0.5, graph_m: int = 3, follow_back: float = 0.2) -> None:
        super().__init__(seed=seed)
        self.rng_ = np.random.default_rng(derive_seed(seed, "social"))
        self.graph = build_graph("ba", n, graph_m, 0.1, follow_back, derive_seed(seed, "graph"))
        self.opinion = self.rng_.random(n)
        self.interests = self.rng_.dirichlet(np.full(forums, 0.5), size=n)
        self.interest_cdf, self.interest_top = np.cumsum(self.interests, axis=1), self.interests.max(axis=1)
        z = self.rng_.standard_normal(n)
        self.activity = np.clip(activity * np.exp(activity_skew * z - activity_skew ** 2 / 2), 0.0, 1.0)
        self.feed_size, self.feed_window, self.max_candidates, self.hot_decay = feed_size, feed_window, max_candidates, hot_decay
        self.epsilon, self.mu, self.forums, self.post_rate, self.sensitivity = epsilon, mu, forums, post_rate, sensitivity
        self.items = Items()
        self.voted: set[tuple[int, int]] = set()
        self.last_post = np.full(n, -1, dtype=np.int64)
        self.outcome: dict[int, str] = {}
        self.members = [Member(self, i, (strategies or ["engaged"])[i % len(strategies or ["engaged"])]) for i in range(n)]
        self.metrics: dict[str, float] = {}

    def apply(self, member: Member, verb: str, k: Optional[int]) -> None:
        """An action on the member's k-th feed item (or idle)."""
        self.counts["idle" if verb == "idle" else f"{verb}s"] += 1
        if verb == "idle":
            return
        item = member.feed[k]
        author = int(self.items.author[item])
        if verb in ("upvote", "downvote"):
            self.voted.add((member.idx, item))
            (self.items.up if verb == "upvote" else self.items.down)[item] += 1
            self.paid[author] += 1 if verb == "upvote" else -1
        elif verb == "follow":
            if not self.graph.has_edge(member.idx, author):
                self.graph.add_edge(member.idx, author)
        elif self.graph.has_edge(member.idx, author):
            self.graph.remove_edge(member.idx, author)

    def step(self) -> None:
        t, n = self.steps, len(self.members)
        self.counts = dict.fromkeys(ACTIONS, 0)
        self.paid = np.zeros(n)
        readers = np.flatnonzero(self.rng_.random(n) < self.activity)
        # feeds: the candidates of the last ticks, ranked for every active member at once (the scenario's ranking)
        it = self.items
        pool_ids = it.window(t - self.feed_window, self.max_candidates)
        pool = feeds.Pool(ids=pool_ids, author=it.author[pool_ids], tick=it.tick[pool_ids], topic=it.topic[pool_ids],
                          score=it.up[pool_ids] - it.down[pool_ids])
        followees = [list(self.graph.successors(r)) for r in readers.tolist()]
        indptr = np.concatenate([[0], np.cumsum([len(f) for f in followees])]).astype(np.int64)
        flat = np.array([v for f in followees for v in f], dtype=np.int64)
        slots, followed = feeds.rank_feeds("hot", readers, indptr, flat, pool, self.interests, self.feed_size, t,
                                           self.hot_decay, self.rng_)
        for r, idx in enumerate(readers.tolist()):
            member = self.members[idx]
            member.feed = [int(pool_ids[s]) for s in slots[r] if s >= 0]
            member.followed = followed[r, :len(member.feed)].tolist()
        # reading: each active member moves toward one item it read, when close enough
        seen = [self.members[idx].feed for idx in readers.tolist()]
        if readers.size and self.mu:
            pick = self.rng_.random(readers.size)
            one = np.array([it.stance[f[min(int(u * len(f)), len(f) - 1)]] if f else np.nan for f, u in zip(seen, pick)])
            self.opinion = deffuant_read(self.opinion, readers, one, self.epsilon, self.mu)
        self.outcome = {}
        for idx in readers.tolist():  # a member's latest post is judged at its first active tick 2 ticks later
            p = int(self.last_post[idx])
            if p >= 0 and it.tick[p] <= t - 2:
                if it.up[p] > 0:
                    self.outcome[idx] = "upvoted"
                elif it.replies[p] == 0 and it.down[p] == 0:
                    self.outcome[idx] = "ignored"
                self.last_post[idx] = -1
        u = self.rng_.random(readers.size)[:, None]
        forum = np.minimum((self.interest_cdf[readers] < u).sum(axis=1), self.forums - 1).tolist()
        self.post_forum = dict(zip(readers.tolist(), forum))
        active = [self.members[idx] for idx in readers.tolist()]
        for member in active:
            member.writes = None
        mesa.agent.AgentSet(active, random=self.random).shuffle_do("choose")
        writers = [member for member in active if member.writes is not None]
        mesa.agent.AgentSet(writers, random=self.random).shuffle_do("write")  # then the posts and comments chosen
        self.metrics = {"active": float(readers.size), **{k: float(v) for k, v in self.counts.items()},
                        "follow_edges": float(self.graph.number_of_edges()), "opinion_mean": float(self.opinion.mean())}


#: the engine's scenario this model stands beside
SCENARIO = "social"


def timing(n: int = 2000, ticks: int = 20) -> tuple[list[str], Callable[[int], PlainSocial], int]:
    """The timed pair: n engaged members, `ticks` ticks (the network metrics only at the first and last)."""
    sets = [f"agents={n}", f"ticks={ticks}", f"metric_every={ticks}"]
    return sets, lambda seed: PlainSocial(n, seed=seed), ticks


def check() -> tuple[list[str], Callable[[int], PlainSocial], int, dict[str, str]]:
    """The pair that must agree: 300 members, a broadcaster for every two lurkers, all active half the time."""
    sets = ["agents=300", "ticks=12", "activity=0.5", "activity_skew=0",
            "population=[{count: 100, strategy: broadcaster}, {count: 200, strategy: lurker}]"]
    plain = lambda seed: PlainSocial(300, seed=seed, activity=0.5, activity_skew=0.0,  # noqa: E731
                                     strategies=["broadcaster"] * 100 + ["lurker"] * 200)
    keys = ("active", "posts", "upvotes", "idle", "follow_edges", "opinion_mean")
    return sets, plain, 12, {k: k for k in keys}
