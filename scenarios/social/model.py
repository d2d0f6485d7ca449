"""A Reddit-like community (MoltBook, OASIS): follow graph, ranked feeds, posts, comments, votes, opinions.

Each tick every agent is active with its own activity rate. An active member sees a feed of
at most `feed_size` recent items ranked by the recommender, updates its opinion on what it
read (scripted members: Deffuant or Hegselmann–Krause bounded confidence), then
1. choose: one action — post, comment K, upvote K, downvote K, follow K, unfollow K, idle;
2. write: those who chose post or comment write the text (a second batched stage);
3. stance (only when LLM members exist and `stance_readback` is on, the default): each LLM message's
   stance is read off its text by scoring the five stance labels with the same model, persona-free;
   the author's opinion becomes that stance. With it off, a message carries its author's opinion
   and LLM members update theirs by the bounded-confidence rule, as scripted members do.
Upvotes, downvotes and replies received are the payoffs (plus an optional platform bonus
per reply to a post); members are shown what they got since their last visit.

Everything per agent lives in numpy arrays; per tick the cost is O(N) for the activity
draw plus O(active x candidates) for the feeds; the expensive network metrics are computed
every `metric_every` ticks (and on the last) on samples (see `tick_metric_docs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar, Literal, Optional

import numpy as np
from pydantic import Field, model_validator

from agents.base import SocietyAgent
from sim.reward.components import nonzero
from sim.core.contracts import Decision, DecisionRequest
from sim.core.rng import derive_seed
from sim.tick.config import ScenarioConfig
from sim.tick.model import SocietyModel
from sim.core.spaces import Choice, Text
from scenarios.social import feed as feeds
from scenarios.social import metrics as M
from scenarios.social import opinions
from scenarios.social import templates as tpl
from scenarios.social.editions import EDITIONS, SocialEdition
from scenarios.social.graph import GENERATED, MAX_COMPLETE, build_graph, edgelist_nodes
from scenarios.social.items import Items
from scenarios.social.strategies import STRATEGIES
from scenarios.social.probes import PROBES

StrategyName = Literal["engaged", "lurker", "broadcaster", "random"]
VERBS = ("comment", "upvote", "downvote", "follow", "unfollow")
STANCE_SPACE = Choice(tpl.STANCES)


class SocialConfig(ScenarioConfig):
    """Config of the community; every field can be set with `--set key=value`."""

    count_field: ClassVar[str] = "agents"
    path_fields: ClassVar[tuple[str, ...]] = ("graph",)

    agents: int = Field(200, ge=2, le=1_000_000, description="number of members")
    ticks: int = Field(50, ge=1, le=100_000, description="ticks to run")
    graph: str = Field("ba", description="initial follow graph: ba, ws, er, complete, empty, or an edge-list file path")
    graph_m: int = Field(3, ge=1, le=100, description="ba: follows per newcomer; ws: k = 2m ring neighbours; er: mean out-degree")
    rewire: float = Field(0.1, ge=0.0, le=1.0, description="ws: rewiring probability")
    follow_back: float = Field(0.2, ge=0.0, le=1.0, description="generated graphs: probability each follow is returned")
    recommender: Literal["chronological", "hot", "personalized", "random"] = Field("hot", description="feed ranking")
    feed_size: int = Field(10, ge=1, le=50, description="items per feed")
    feed_window: int = Field(5, ge=1, le=10_000, description="feeds draw on the items of the last this many ticks")
    max_candidates: int = Field(2000, ge=10, le=100_000, description="at most this many newest items are ranked per tick")
    hot_decay: float = Field(3.0, gt=0.0, le=1e6, description="hot: ticks that weigh as much as a tenfold vote score")
    opinion_model: Literal["deffuant", "hk"] = Field("deffuant", description="scripted opinion update on what members read")
    epsilon: float = Field(0.2, ge=0.0, le=1.0, description="confidence bound: opinions closer than this interact (and agree)")
    mu: float = Field(0.3, ge=0.0, le=1.0, description="convergence rate: share of the difference moved per interaction")
    like_minded: float = Field(0.2, ge=0.0, le=1.0, description="echo chamber: an author is like-minded within this opinion distance")
    topic: str = Field("Should AI agents run their own communities without human oversight?", min_length=1, max_length=300,
                       description="the question the community debates (opinion 1 = yes)")
    forums: int = Field(8, ge=1, le=len(tpl.FORUMS), description="number of forums (topics of items)")
    interest_concentration: float = Field(0.5, gt=0.0, le=100.0, description="Dirichlet concentration of interests over forums")
    activity: float = Field(0.1, ge=0.0, le=1.0, description="mean probability that a member is active in a tick")
    activity_skew: float = Field(1.0, ge=0.0, le=5.0, description="sigma of the lognormal spread of activity rates")
    strategy: StrategyName = Field("engaged", description="scripted strategy of the members")
    post_rate: float = Field(0.3, ge=0.0, le=1.0, description="engaged members: probability of posting when active")
    reward_sensitivity: float = Field(0.5, ge=0.0, le=10.0,
                                      description="engaged: post rate x (1+s) after an upvoted post, / (1+s) after an ignored one")
    upvote_value: float = Field(1.0, ge=0.0, le=100.0, description="payoff per upvote received")
    downvote_value: float = Field(1.0, ge=0.0, le=100.0, description="payoff lost per downvote received")
    reply_value: float = Field(1.0, ge=0.0, le=100.0, description="payoff per reply received")
    reply_bonus: float = Field(0.0, ge=0.0, le=100.0, description="platform incentive: extra payoff per reply to a post")
    show_reward: bool = Field(True, description="LLM members are told the votes and replies they got since their last visit")
    text_tokens: int = Field(40, ge=4, le=256, description="LLM messages: at most this many tokens")
    stance_readback: bool = Field(True, description="an LLM member's message takes the stance read back from its text, and its "
                                  "author's opinion becomes that stance (so epsilon does not apply to LLM members); false: "
                                  "messages carry the author's opinion and LLM members read by the bounded-confidence rule too")
    metric_every: int = Field(10, ge=1, le=100_000, description="expensive network metrics every this many ticks (and the last)")
    metric_sample: int = Field(500, ge=10, le=1_000_000, description="nodes sampled for the clustering coefficient")
    path_sources: int = Field(16, ge=1, le=10_000, description="breadth-first-search sources sampled for the mean shortest path")
    cluster_gap: float = Field(0.05, gt=0.0, le=1.0, description="opinion clusters: sorted opinions further apart than this split")

    def data_paths(self) -> dict[str, Path]:
        return {} if self.graph in GENERATED else {"graph": Path(self.graph)}

    @model_validator(mode="after")
    def _check(self) -> "SocialConfig":
        if self.graph not in GENERATED:
            path = Path(self.graph)
            if not path.is_file():
                raise ValueError(f"graph must be one of {', '.join(GENERATED)} or an edge-list file; {self.graph!r} is neither")
            nodes = edgelist_nodes(path)
            if nodes > self.agents:
                raise ValueError(f"edge-list {self.graph!r} names {nodes} nodes but agents={self.agents}; set agents >= {nodes}")
        if self.graph == "complete" and self.agents > MAX_COMPLETE:
            raise ValueError(f"graph=complete is limited to {MAX_COMPLETE} agents (n(n-1) follows); got agents={self.agents}")
        return self


class Member(SocietyAgent):
    """A member: its index into the model's arrays (opinions, interests, activity) and its policy."""

    def __init__(self, model: "SocialModel", idx: int, policy: str, strategy: str, persona: str) -> None:
        super().__init__(model, policy=policy, strategy=strategy, persona=persona, memory=model.new_memory())
        self.idx = idx


@lru_cache(maxsize=8192)
def action_space(n_items: int, followed: tuple[bool, ...], voted: tuple[bool, ...]) -> Choice:
    """post, idle, and per feed item K: comment K, up/downvote K (unless voted), follow or unfollow K."""
    options = ["post", "idle"]
    for k in range(n_items):
        options.append(f"comment {k + 1}")
        if not voted[k]:
            options += [f"upvote {k + 1}", f"downvote {k + 1}"]
        options.append(f"unfollow {k + 1}" if followed[k] else f"follow {k + 1}")
    return Choice(tuple(options))


class SocialModel(SocietyModel):
    """The community. Phases per tick: choose, write, and stance when LLM members write."""

    name = "social"
    description = "Reddit-like community (MoltBook, OASIS): feeds, posts, comments, votes, follows, opinions"
    Config = SocialConfig
    horizon_field = "ticks"
    strategies = STRATEGIES
    probes = PROBES  # validity probes (`societas probe`): sim.tick.probe
    default_strategy = "engaged"
    tick_noun = "tick"
    #: read as the ticks go (members, the graph, forums, interests, activity and strategies are built at the start)
    fork_fields = frozenset({"recommender", "feed_size", "feed_window", "max_candidates", "hot_decay", "opinion_model",
                             "epsilon", "mu", "like_minded", "topic", "post_rate", "reward_sensitivity", "upvote_value",
                             "downvote_value", "reply_value", "reply_bonus", "show_reward", "text_tokens", "metric_every",
                             "metric_sample", "path_sources", "cluster_gap", "stance_readback"})
    editions = EDITIONS  # what changed between decision contracts: scenarios.social.editions
    config: SocialConfig
    edition: SocialEdition

    #: published values for a real network of AI agents, shown beside a run's (see analysis/reference.py)
    reference: ClassVar[dict[str, dict[str, Any]]] = {
        "reciprocity": {"value": 0.197, "source": "MoltBook, arXiv 2602.10131",
                        "set_by": "input: the seeded graph's follow_back (follows during the run move it a little)"},
        "comment_depth_mean": {"value": 1.07, "source": "MoltBook, arXiv 2602.10131", "set_by": "emerges"},
        "duplicate_share": {"value": 0.341, "source": "MoltBook, arXiv 2602.10131 (34.1% exact duplicates)",
                            "set_by": "emerges"},
        "participation_gini_authors": {"value": 0.84, "source": "MoltBook, arXiv 2603.16128 (Reddit: 0.47)", "reddit": 0.47,
                                       "set_by": "emerges"},
    }

    # ----- setup ---------------------------------------------------------------------------------
    def setup(self) -> None:
        c = self.config
        n = c.agents
        self.rng = np.random.default_rng(derive_seed(self.seed, "social"))
        self.graph = build_graph(c.graph, n, c.graph_m, c.rewire, c.follow_back, derive_seed(self.seed, "graph"))
        self.in_deg = M.in_degrees(self.graph, n)
        self.n_edges = self.graph.number_of_edges()  # kept up to date: networkx counts edges in O(N)
        self.mutual = int(round(M.reciprocity(self.graph) * self.n_edges))
        self.opinion = self.rng.random(n)
        self.opinion0 = self.opinion.copy()
        self.interests = self.rng.dirichlet(np.full(c.forums, c.interest_concentration), size=n)
        self.interest_cdf = np.cumsum(self.interests, axis=1)
        self.interest_top = self.interests.max(axis=1)
        z = self.rng.standard_normal(n)
        self.activity = np.clip(c.activity * np.exp(c.activity_skew * z - c.activity_skew ** 2 / 2), 0.0, 1.0)
        self.items = Items()
        self.posts_by = np.zeros(n, dtype=np.int64)
        self.comments_by = np.zeros(n, dtype=np.int64)
        self.seen_up = np.zeros(n, dtype=np.int64)  # received since the member was last active
        self.seen_down = np.zeros(n, dtype=np.int64)
        self.seen_replies = np.zeros(n, dtype=np.int64)
        self.last_post = np.full(n, -1, dtype=np.int64)  # latest post not yet judged (responsiveness)
        self.voted: set[tuple[int, int]] = set()
        self.texts_seen: set[str] = set()
        self.totals = dict.fromkeys(("posts", "comments", "upvotes", "downvotes", "follows", "unfollows", "idle"), 0)
        self.response = np.zeros(4, dtype=np.int64)  # upvoted: n, posted; ignored: n, posted
        self.exposure = np.zeros(2, dtype=np.int64)  # like-minded exposures, all exposures
        self.convergence: list[float] = []
        self.members: list[Member] = []
        for idx, (policy, strategy, persona) in enumerate(self.population_plan(n)):
            self.members.append(Member(self, idx, policy, strategy, persona))
        self.is_llm = np.array([m.policy == "llm" for m in self.members])
        self.uid = np.array([m.unique_id for m in self.members], dtype=np.int64)
        self.expensive: dict[str, Optional[float]] = {}
        self._reset_tick()

    def _reset_tick(self) -> None:
        n = self.config.agents
        self.row = np.full(n, -1, dtype=np.int64)
        self.feed_ids = np.zeros((0, self.config.feed_size), dtype=np.int64)
        self.feed_followed = np.zeros((0, self.config.feed_size), dtype=bool)
        self.outcome: dict[int, str] = {}
        self.pending: dict[int, tuple[str, int]] = {}  # idx -> ("post", forum) or ("comment", parent item)
        self.wrote: dict[int, int] = {}  # idx -> item written this tick
        self.tick_items: list[int] = []
        self.got_up = np.zeros(n, dtype=np.int64)
        self.got_down = np.zeros(n, dtype=np.int64)
        self.got_replies = np.zeros(n, dtype=np.int64)
        self.got_post_replies = np.zeros(n, dtype=np.int64)
        self.counts = dict.fromkeys(self.totals, 0)
        self.echo: Optional[float] = None

    # ----- the tick: feeds and reading ----------------------------------------------------------
    def phases(self) -> Sequence[str]:
        return ("choose", "write", "stance") if self.config.stance_readback and self.is_llm.any() else ("choose", "write")

    def update(self) -> None:
        c, t = self.config, self.tick
        self._reset_tick()
        readers = np.flatnonzero(self.rng.random(c.agents) < self.activity)
        self.row[readers] = np.arange(readers.size)
        self.readers = readers
        pool_ids = self.items.window(t - c.feed_window, c.max_candidates)
        it = self.items
        pool = feeds.Pool(ids=pool_ids, author=it.author[pool_ids], tick=it.tick[pool_ids], topic=it.topic[pool_ids],
                          score=it.up[pool_ids] - it.down[pool_ids])
        succ = self.graph._succ  # noqa: SLF001 - read-only adjacency, one lookup per reader
        lens = np.fromiter((len(succ[r]) for r in readers.tolist()), dtype=np.int64, count=readers.size)
        indptr = np.concatenate([[0], np.cumsum(lens)])
        followees = np.fromiter((v for r in readers.tolist() for v in succ[r]), dtype=np.int64, count=int(indptr[-1]))
        slots, self.feed_followed = feeds.rank_feeds(c.recommender, readers, indptr, followees, pool, self.interests,
                                                     c.feed_size, t, c.hot_decay, self.rng)
        self.feed_ids = np.where(slots >= 0, pool_ids[np.maximum(slots, 0)] if len(pool) else -1, -1)
        safe = np.maximum(self.feed_ids, 0)
        stances = np.where(self.feed_ids >= 0, it.stance[safe], np.nan)
        self._read(readers, stances)
        self._judge_last_posts(readers)
        # per-reader views as Python lists, built once per tick (observe only slices them)
        self.n_feed = (self.feed_ids >= 0).sum(axis=1).tolist()
        self.feed_list = self.feed_ids.tolist()
        self.stance_list = stances.tolist()
        self.followed_list = self.feed_followed.tolist()
        self.interest_list = (self.interests[readers[:, None], it.topic[safe]] / self.interest_top[readers][:, None]).tolist()
        u = self.rng.random(readers.size)[:, None]
        self.post_forum = np.minimum((self.interest_cdf[readers] < u).sum(axis=1), c.forums - 1).tolist()

    def _read(self, readers: np.ndarray, stances: np.ndarray) -> None:
        """Echo-chamber exposure, then the scripted readers' bounded-confidence update on what they read."""
        c = self.config
        seen = ~np.isnan(stances)
        close = (np.abs(stances - self.opinion[readers][:, None]) <= c.like_minded) & seen
        self.exposure += (int(close.sum()), int(seen.sum()))
        self.echo = float(close.sum() / seen.sum()) if seen.any() else None
        learners = ~self.is_llm[readers] if c.stance_readback else np.ones(readers.size, dtype=bool)  # read-back sets LLM opinions
        who, st = readers[learners], stances[learners]
        if who.size == 0 or c.mu == 0:
            return
        if c.opinion_model == "hk":
            self.opinion = opinions.hk_read(self.opinion, who, st, c.epsilon, c.mu)
        else:
            n_seen = (~np.isnan(st)).sum(axis=1)  # seen slots come first, empty ones (-1) last
            pick = np.minimum((self.rng.random(who.size) * n_seen).astype(np.int64), np.maximum(n_seen - 1, 0))
            one = np.where(n_seen > 0, st[np.arange(who.size), pick], np.nan)
            self.opinion = opinions.deffuant_read(self.opinion, who, one, c.epsilon, c.mu)

    def _judge_last_posts(self, readers: np.ndarray) -> None:
        """A member's latest post is judged at its first active tick at least 2 ticks later (a full tick in feeds)."""
        it = self.items
        waiting = readers[self.last_post[readers] >= 0]
        for idx in waiting.tolist():
            p = int(self.last_post[idx])
            if it.tick[p] > self.tick - 2:
                continue
            if it.up[p] > 0:
                self.outcome[idx] = "upvoted"
            elif it.replies[p] == 0 and it.down[p] == 0:
                self.outcome[idx] = "ignored"
            self.last_post[idx] = -1

    # ----- requests -------------------------------------------------------------------------------
    def observe(self, agent: Member, phase: str) -> Optional[DecisionRequest]:
        idx = agent.idx
        if phase == "choose":
            r = self.row[idx]
            return None if r < 0 else self._choose_request(agent, int(r))
        if phase == "write":
            return self._write_request(agent) if idx in self.pending else None
        if phase == "stance" and idx in self.wrote and agent.policy == "llm":
            item = self.wrote[idx]
            return DecisionRequest(
                agent_id=agent.unique_id, tick=self.tick, phase=phase, space=STANCE_SPACE, default="neutral",
                backend=agent.policy, strategy=agent.strategy,
                context=tpl.STANCE_CONTEXT.substitute(topic=self.config.topic, text=self.quoted(self.items.text[item])),
                question=tpl.STANCE_QUESTION, seed=self.seeds.seed_for(self.tick, agent.unique_id, phase))
        return None

    def _feed_of(self, r: int) -> list[int]:
        return self.feed_list[r][: self.n_feed[r]]

    def _choose_request(self, agent: Member, r: int) -> DecisionRequest:
        c, idx, k = self.config, agent.idx, self.n_feed[r]
        ids = self.feed_list[r][:k]
        followed = tuple(self.followed_list[r][:k])
        voted = tuple((idx, i) in self.voted for i in ids) if self.voted else (False,) * k
        space = action_space(k, followed, voted)
        obs = {
            "opinion": float(self.opinion[idx]), "epsilon": c.epsilon, "post_rate": c.post_rate,
            "reward_sensitivity": c.reward_sensitivity, "last_post": self.outcome.get(idx),
            "stances": self.stance_list[r][:k], "followed": list(followed), "interest": self.interest_list[r][:k],
        }
        context = self._context(agent, ids, followed) if agent.policy == "llm" else ""
        return self.request(agent, "choose", space, "idle", obs, context, tpl.CHOOSE)

    def _context(self, agent: Member, ids: list[int], followed: tuple[bool, ...]) -> str:
        """Shared rules first, then this member's feed, rewards and view (prefix sharing across the batch)."""
        c, it, idx = self.config, self.items, agent.idx
        text = tpl.RULES.substitute(forums=", ".join(f"m/{f}" for f in tpl.FORUMS[: c.forums]), topic=c.topic)
        shown = [tpl.ITEM.substitute(
            k=k + 1, kind="comment" if it.parent[i] >= 0 else "post", author=int(self.uid[it.author[i]]),
            followed=" (you follow)" if followed[k] else "", forum=tpl.FORUMS[it.topic[i]],
            score=int(it.up[i] - it.down[i]), replies=int(it.replies[i]), text=self.edition.shown(it.text[i])) for k, i in enumerate(ids)]
        text += tpl.FEED.substitute(items="".join(shown)) if shown else tpl.FEED_EMPTY
        if c.show_reward:
            text += tpl.REWARD.substitute(up=int(self.seen_up[idx]), down=int(self.seen_down[idx]), replies=int(self.seen_replies[idx]))
        return text + tpl.YOU.substitute(agent=agent.unique_id, stance=tpl.stance_words(float(self.opinion[idx])))

    def _write_request(self, agent: Member) -> DecisionRequest:
        c, it, idx = self.config, self.items, agent.idx
        kind, ref = self.pending[idx]
        obs: dict[str, Any] = {"kind": kind, "opinion": float(self.opinion[idx]), "epsilon": c.epsilon}
        if kind == "post":
            obs["forum"] = tpl.FORUMS[ref]
            question = tpl.WRITE_POST.substitute(forum=tpl.FORUMS[ref])
        else:
            obs.update(forum=tpl.FORUMS[it.topic[ref]], parent_stance=float(it.stance[ref]))
            k = self._feed_of(int(self.row[idx])).index(ref) + 1
            question = tpl.WRITE_COMMENT.substitute(k=k, author=int(self.uid[it.author[ref]]), text=self.edition.shown(it.text[ref]))
        context = ""
        if agent.policy == "llm":
            r = int(self.row[idx])
            ids = self._feed_of(r)
            context = self._context(agent, ids, tuple(self.feed_followed[r, : len(ids)].tolist()))
        default = "Interesting." if kind == "comment" else f"Hello m/{obs['forum']}."
        return self.request(agent, "write", Text(max_tokens=c.text_tokens), default, obs, context, question)

    # ----- acting -------------------------------------------------------------------------------------
    def act(self, phase: str, decisions: Sequence[Decision]) -> None:
        if phase == "choose":
            for d in decisions:
                self._apply_choice(d)
            self.seen_up[self.readers] = 0  # members have now been shown what they got
            self.seen_down[self.readers] = 0
            self.seen_replies[self.readers] = 0
            self._count_responses()
        elif phase == "write":
            for d in decisions:
                self._apply_text(d)
            if "stance" not in self.phases():
                self._publish()
        elif phase == "stance":
            for d in decisions:
                idx = d.agent_id - int(self.uid[0])
                value = tpl.STANCE_VALUES[tpl.STANCES.index(d.value)]
                self.items.stance[self.wrote[idx]] = value
                self.opinion[idx] = value
            self._publish()

    def _apply_choice(self, d: Decision) -> None:
        idx = d.agent_id - int(self.uid[0])
        agent = self.members[idx]
        verb, _, k = str(d.value).partition(" ")
        if verb == "idle":
            self.counts["idle"] += 1
            return
        if verb == "post":
            self.pending[idx] = ("post", self.post_forum[self.row[idx]])  # drawn from its interests in update()
            return
        item = self._feed_of(int(self.row[idx]))[int(k) - 1]
        author = int(self.items.author[item])
        if verb == "comment":
            self.pending[idx] = ("comment", item)
        elif verb in ("upvote", "downvote"):
            self.voted.add((idx, item))
            up = verb == "upvote"
            (self.items.up if up else self.items.down)[item] += 1
            (self.got_up if up else self.got_down)[author] += 1
            self.counts[f"{verb}s"] += 1
            agent.relate(int(self.uid[author]), 0.1 if up else -0.1)
            self.emit(verb, agent.unique_id, int(self.uid[author]), item=item)
        elif verb == "follow":
            self._follow(idx, author, agent)
        elif verb == "unfollow":
            self._unfollow(idx, author, agent)

    def _follow(self, u: int, v: int, agent: Member) -> None:
        if self.graph.has_edge(u, v):
            return
        self.graph.add_edge(u, v)
        self.n_edges += 1
        self.in_deg[v] += 1
        self.mutual += 2 * self.graph.has_edge(v, u)
        self.counts["follows"] += 1
        agent.relate(int(self.uid[v]), 0.2)
        self.emit("follow", agent.unique_id, int(self.uid[v]))

    def _unfollow(self, u: int, v: int, agent: Member) -> None:
        if not self.graph.has_edge(u, v):
            return
        self.graph.remove_edge(u, v)
        self.n_edges -= 1
        self.in_deg[v] -= 1
        self.mutual -= 2 * self.graph.has_edge(v, u)
        self.counts["unfollows"] += 1
        agent.relate(int(self.uid[v]), -0.2)
        self.emit("unfollow", agent.unique_id, int(self.uid[v]))

    def _count_responses(self) -> None:
        """Responsiveness: did a member whose last post was upvoted / ignored post again now?"""
        for idx, outcome in self.outcome.items():
            posted = self.pending.get(idx, ("",))[0] == "post"
            k = 0 if outcome == "upvoted" else 2
            self.response[k] += 1
            self.response[k + 1] += posted

    def _apply_text(self, d: Decision) -> None:
        idx = d.agent_id - int(self.uid[0])
        kind, ref = self.pending[idx]
        text = str(d.value)
        it = self.items
        if kind == "post":
            item = it.add(idx, self.tick, ref, float(self.opinion[idx]), -1, text)
            self.posts_by[idx] += 1
            self.last_post[idx] = item
        else:
            item = it.add(idx, self.tick, int(it.topic[ref]), float(self.opinion[idx]), ref, text)
            self.comments_by[idx] += 1
            parent_author = int(it.author[ref])
            self.got_replies[parent_author] += 1
            self.got_post_replies[parent_author] += it.parent[ref] < 0
        self.counts["posts" if kind == "post" else "comments"] += 1
        self.wrote[idx] = item
        self.tick_items.append(item)
        self.members[idx].remember(self.tick, "note", f"I wrote a {kind}: {self.edition.note(text)}")

    def _publish(self) -> None:
        """Posts and comments become events, with their final stance."""
        it = self.items
        for item in self.tick_items:
            parent = int(it.parent[item])
            actor = int(self.uid[it.author[item]])
            data = {"item": item, "forum": tpl.FORUMS[it.topic[item]], "text": it.text[item],
                    "stance": round(float(it.stance[item]), 4)}
            if parent < 0:
                self.emit("post", actor, None, **data)
            else:
                self.emit("comment", actor, int(self.uid[it.author[parent]]), parent=parent, depth=int(it.depth[item]), **data)

    # ----- payoffs and metrics ------------------------------------------------------------------------
    def payoffs(self) -> dict[int, float]:
        c = self.config
        for k, v in self.counts.items():
            self.totals[k] += v
        self.seen_up += self.got_up
        self.seen_down += self.got_down
        self.seen_replies += self.got_replies
        pay = (c.upvote_value * self.got_up - c.downvote_value * self.got_down + c.reply_value * self.got_replies
               + c.reply_bonus * self.got_post_replies)
        return dict(zip(self.uid.tolist(), pay.astype(float).tolist()))

    component_docs = {
        "upvotes": "upvotes the member's posts and comments received this tick",
        "downvotes": "downvotes the member's posts and comments received this tick",
        "replies": "replies the member's posts and comments received this tick (the social reward: attention)",
    }

    def reward_components(self) -> dict[str, dict[int, float]]:
        """The community's feedback on each member's writing this tick (non-zero counts only)."""
        return nonzero(self.uid, (("upvotes", self.got_up), ("downvotes", self.got_down), ("replies", self.got_replies)))

    def _network_metrics(self) -> dict[str, Optional[float]]:
        """The expensive ones, on samples: clustering, power-law fit of total degree, mean shortest path."""
        c, n = self.config, self.config.agents
        rng = np.random.default_rng(derive_seed(self.seed, "metrics", self.tick))
        sample = rng.choice(n, size=min(n, c.metric_sample), replace=False)
        sources = rng.choice(n, size=min(n, c.path_sources), replace=False)
        fit = M.powerlaw_fit(M.total_degrees(self.graph, n))
        return {
            "clustering": M.undirected_clustering(self.graph, sample.tolist()),
            "degree_powerlaw_alpha": fit["alpha"], "degree_powerlaw_ks": fit["ks"], "degree_powerlaw_xmin": fit["xmin"],
            "mean_shortest_path": M.mean_shortest_path(self.graph, sources.tolist()),
        }

    def _opinion_metrics(self) -> dict[str, Optional[float]]:
        x, c = self.opinion, self.config
        out = {"opinion_mean": float(x.mean()), "opinion_variance": float(x.var()),
               "opinion_bimodality": M.bimodality_coefficient(x)}
        out.update(self.edition.clusters(x, c.cluster_gap, c.epsilon))
        return out

    def scenario_metrics(self) -> dict[str, Optional[float]]:
        it = self.items
        edges = self.n_edges
        texts = [it.text[i] for i in self.tick_items]
        posts = [it.text[i] for i in self.tick_items if it.parent[i] < 0]
        comments = [i for i in self.tick_items if it.parent[i] >= 0]
        conv = M.template_convergence(posts)
        if conv is not None:
            self.convergence.append(conv)
        out: dict[str, Optional[float]] = {
            "active": float(self.readers.size), **{k: float(v) for k, v in self.counts.items()},
            "follow_edges": float(edges), "reciprocity": self.mutual / edges if edges else 0.0,
            "indegree_gini": M.gini(self.in_deg), "top1_indegree_share": M.top_share(self.in_deg, 0.01),
            "participation_gini": M.gini(self.posts_by),
            "comment_depth_mean": M.mean_or_none(it.depth[comments]),
            "comments_unreplied_share": M.unreplied_share(it.replies[: it.n][it.comments()]),
            "duplicate_share": M.duplicate_share(texts, self.texts_seen),
            "template_convergence": conv, "echo_chamber": self.echo,
            **self._opinion_metrics(),
        }
        if self.tick == 1 or self.tick % self.config.metric_every == 0 or self.tick == self.config.ticks:
            self.expensive = self._network_metrics()
            out.update(self.expensive)
        return out

    metric_units = {"follow_edges": "edges", "state.follow_edges": "edges", "posts": "posts", "comments": "comments",
                    "upvotes": "votes", "downvotes": "votes", "follows": "follows", "unfollows": "follows",
                    "active": "members", "idle": "members"}

    tick_metric_docs = {
        "active": "members active this tick (each with its own activity rate)",
        "posts": "posts written this tick", "comments": "comments written this tick",
        "upvotes": "upvotes this tick", "downvotes": "downvotes this tick",
        "follows": "new follows this tick", "unfollows": "unfollows this tick", "idle": "active members who did nothing",
        "follow_edges": "follow edges after this tick",
        "reciprocity": "share of follow edges u->v whose reverse exists (networkx overall_reciprocity; MoltBook 0.197)",
        "indegree_gini": "Gini of the members' follower counts (in-degree)",
        "top1_indegree_share": "share of all follows held by the top 1% of members by followers",
        "participation_gini": "Gini of posts per member so far, over all members",
        "comment_depth_mean": "mean depth of this tick's comments (1 = reply to a post)",
        "comments_unreplied_share": "share of all comments so far that have no reply",
        "duplicate_share": "share of this tick's messages whose exact text already occurred in the run",
        "template_convergence": "mean pairwise cosine similarity of this tick's posts' bag-of-words vectors",
        "echo_chamber": "share of this tick's feed exposures whose stance is within like_minded of the reader's opinion",
        "opinion_mean": "mean opinion (0 = no, 1 = yes to the topic)", "opinion_variance": "variance of opinions (polarisation)",
        "opinion_bimodality": "Sarle's bimodality coefficient of opinions (> 5/9 suggests two camps)",
        "opinion_clusters": "major opinion clusters: groups of sorted opinions split at gaps > cluster_gap, no wider than "
                            "epsilon, holding >= 10% of members (runs before contract 6: every group of >= 1%, however wide)",
        "opinion_minor_clusters": "formed clusters (>= 2 members, no wider than epsilon) holding < 10% of members",
        "opinion_unclustered_share": "share of members in no formed cluster: singletons and spreads wider than epsilon",
        "clustering": "every metric_every ticks and the last: mean undirected local clustering over metric_sample members",
        "degree_powerlaw_alpha": "every metric_every ticks: discrete MLE exponent of the total-degree tail (Clauset et al. 2009)",
        "degree_powerlaw_ks": "every metric_every ticks: KS distance of that fit (goodness of fit; smaller is better)",
        "degree_powerlaw_xmin": "every metric_every ticks: the fitted lower bound of the power-law tail",
        "mean_shortest_path": "every metric_every ticks: mean hop distance (undirected) from path_sources sampled members",
    }

    def final_metrics(self) -> dict[str, Optional[float]]:
        it = self.items
        edges = self.n_edges
        comments = it.comments()
        authors = self.posts_by[self.posts_by > 0]
        upvoted = M.rate(self.response[1], self.response[0])
        ignored = M.rate(self.response[3], self.response[2])
        return {
            **{f"{k}_total": float(v) for k, v in self.totals.items()},
            "messages_total": float(it.n),
            "follow_edges": float(edges), "reciprocity": self.mutual / edges if edges else 0.0,
            "indegree_gini": M.gini(self.in_deg), "top1_indegree_share": M.top_share(self.in_deg, 0.01),
            **self.expensive,
            "participation_gini": M.gini(self.posts_by),
            "participation_gini_authors": M.gini(authors) if authors.size else None,
            "comment_depth_mean": M.mean_or_none(it.depth[: it.n][comments]),
            "comments_unreplied_share": M.unreplied_share(it.replies[: it.n][comments]),
            "duplicate_share": (it.n - len(self.texts_seen)) / it.n if it.n else None,
            "template_convergence": float(np.mean(self.convergence)) if self.convergence else None,
            "echo_chamber": M.rate(self.exposure[0], self.exposure[1]),
            **self._opinion_metrics(),
            "opinion_shift": float(np.abs(self.opinion - self.opinion0).mean()),
            "post_rate_after_upvoted": upvoted, "post_rate_after_ignored": ignored,
            "reward_responsiveness": upvoted - ignored if upvoted is not None and ignored is not None else None,
        }

    final_metric_docs = {
        "posts_total": "posts over the run", "comments_total": "comments over the run",
        "upvotes_total": "upvotes over the run", "downvotes_total": "downvotes over the run",
        "follows_total": "follows over the run", "unfollows_total": "unfollows over the run",
        "idle_total": "active member-ticks with no action", "messages_total": "posts + comments over the run",
        "follow_edges": "follow edges at the end",
        "reciprocity": "share of final follow edges whose reverse exists (MoltBook 0.197, arXiv 2602.10131)",
        "indegree_gini": "Gini of final follower counts",
        "top1_indegree_share": "share of final follows held by the top 1% of members",
        "clustering": "mean undirected local clustering of the final graph over metric_sample sampled members",
        "degree_powerlaw_alpha": "discrete MLE power-law exponent of the final total degrees (x_min by minimum KS)",
        "degree_powerlaw_ks": "KS distance of the final fit (goodness of fit)",
        "degree_powerlaw_xmin": "x_min of the final fit",
        "mean_shortest_path": "mean undirected hop distance of the final graph from path_sources sampled sources",
        "participation_gini": "Gini of posts per member over the run, all members counted",
        "participation_gini_authors": "Gini of posts per member among members with >= 1 post (MoltBook 0.84, Reddit 0.47, arXiv 2603.16128)",
        "comment_depth_mean": "mean depth of all comments, 1 = reply to a post (MoltBook 1.07)",
        "comments_unreplied_share": "share of all comments that got no reply",
        "duplicate_share": "share of all messages whose exact text occurred earlier in the run (MoltBook 34.1%)",
        "template_convergence": "mean over ticks of the mean pairwise bag-of-words cosine similarity of the tick's posts",
        "echo_chamber": "share of all feed exposures over the run whose stance was within like_minded of the reader",
        "opinion_mean": "final mean opinion", "opinion_variance": "final opinion variance (polarisation)",
        "opinion_bimodality": "final Sarle bimodality coefficient",
        "opinion_clusters": "final number of major opinion clusters (see the tick metric; runs before contract 6: "
                            "groups of >= 1% of members, however wide)",
        "opinion_minor_clusters": "final number of minor opinion clusters",
        "opinion_unclustered_share": "final share of members in no formed cluster (1 = a spread, not a consensus)",
        "opinion_shift": "mean absolute change of a member's opinion from start to end",
        "post_rate_after_upvoted": "share of judged posts with >= 1 upvote after which the author's next active tick was a post",
        "post_rate_after_ignored": "same after posts with no vote and no reply",
        "reward_responsiveness": "post_rate_after_upvoted - post_rate_after_ignored",
    }

    def initial_state(self) -> dict[str, Any]:
        """The seeded follow graph as [follower, followee] agent ids: the events carry only the run's changes."""
        uid = self.uid.tolist()
        return {"follows": [[uid[u], uid[v]] for u, v in self.graph.edges]}

    def state(self) -> dict[str, Any]:
        """Aggregates only: per-member actions are in agent_steps, messages in events."""
        hist = np.histogram(self.opinion, bins=10, range=(0.0, 1.0))[0]
        return {"follow_edges": self.n_edges, "items": self.items.n, "active": int(self.readers.size),
                "opinion_histogram": hist.tolist()}

