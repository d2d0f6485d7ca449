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

This module holds the tick: the community's state, its feeds and reading, and what each phase asks and
does. Beside it, an idea a module: the config (`config`), the follow graph (`graph`), the items (`items`),
feed ranking (`feed`), opinion updates (`opinions`), the prompt text (`prompts`, `templates`), the metric
functions (`metrics`) and the figures it reports (`report`), and the pieces that changed between decision
contracts (`editions`, `legacy`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any, ClassVar, Optional

import numpy as np

from sim.contracts.agent import SocietyAgent
from scenarios.social import archetypes
from scenarios.social import feed as feeds
from scenarios.social import metrics as M
from scenarios.social import opinions, prompts, report
from scenarios.social import templates as tpl
from scenarios.social.config import SocialConfig
from scenarios.social.editions import EDITIONS, SocialEdition
from scenarios.social.graph import build_graph
from scenarios.social.items import Items
from scenarios.social.probes import PROBES
from scenarios.social.strategies import STRATEGIES
from sim.core.contracts import Decision, DecisionRequest
from sim.core.rng import derive_seed
from sim.core.spaces import Choice, Text
from sim.reward.components import nonzero
from sim.tick.model import SocietyModel

STANCE_SPACE = Choice(tpl.STANCES)


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
    archetype = staticmethod(archetypes.archetype)  # buckets under llm.archetypes (agents.llm.archetypes)
    default_strategy = "engaged"
    tick_noun = "tick"
    #: read as the ticks go (members, the graph, forums, interests, activity and strategies are built at the start)
    fork_fields = frozenset({"recommender", "feed_size", "feed_window", "max_candidates", "hot_decay", "opinion_model",
                             "epsilon", "mu", "like_minded", "topic", "post_rate", "reward_sensitivity", "upvote_value",
                             "downvote_value", "reply_value", "reply_bonus", "show_reward", "text_tokens", "metric_every",
                             "metric_sample", "path_sources", "cluster_gap", "stance_readback"})
    fork_conditions = {  # what the world reads only under some condition (sim.tick.model.SocietyModel)
        **dict.fromkeys(("show_reward", "stance_readback", "text_tokens", "topic"), ({"@policy": "llm"},)),
        # the scripted opinion update: scripted members, and LLM members whose stance is not read back from their text
        **dict.fromkeys(("mu", "opinion_model"), ({"@policy": "scripted"}, {"stance_readback": False})),
    }
    editions = EDITIONS  # what changed between decision contracts: scenarios.social.editions
    tick_metric_docs = report.TICK_METRIC_DOCS
    final_metric_docs = report.FINAL_METRIC_DOCS
    component_docs = report.COMPONENT_DOCS
    metric_units = report.UNITS
    config: SocialConfig
    edition: SocialEdition

    #: published values for a real network of AI agents, shown beside a run's (see analysis/reference.py)
    reference: ClassVar[dict[str, dict[str, Any]]] = report.REFERENCE

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
        return _REQUESTS[phase](self, agent)

    def _feed_of(self, r: int) -> list[int]:
        return self.feed_list[r][: self.n_feed[r]]

    def _request_choose(self, agent: Member) -> Optional[DecisionRequest]:
        """An active member's one action on its feed (post, idle, or comment, vote, follow or unfollow item K)."""
        r = int(self.row[agent.idx])
        if r < 0:
            return None  # not active this tick
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
        if agent.policy != "llm":
            return self.request(agent, "choose", space, "idle", obs, "", tpl.CHOOSE)
        obs["feed_forum"] = tpl.FORUMS[int(self.items.topic[ids[0]])] if k else None  # (an archetype's key)
        return self.deferred(agent, "choose", space, "idle", obs, lambda: self.request(
            agent, "choose", space, "idle", obs, prompts.feed_context(self, agent, ids, followed), tpl.CHOOSE))

    def _request_write(self, agent: Member) -> Optional[DecisionRequest]:
        """The text of the post or comment a member chose to write."""
        if agent.idx not in self.pending:
            return None
        c, it, idx = self.config, self.items, agent.idx
        kind, ref = self.pending[idx]
        obs: dict[str, Any] = {"kind": kind, "opinion": float(self.opinion[idx]), "epsilon": c.epsilon}
        if kind == "post":
            obs["forum"] = tpl.FORUMS[ref]
        else:
            obs.update(forum=tpl.FORUMS[it.topic[ref]], parent_stance=float(it.stance[ref]))
        default = "Interesting." if kind == "comment" else f"Hello m/{obs['forum']}."
        space = Text(max_tokens=c.text_tokens)
        if agent.policy != "llm":
            return self.request(agent, "write", space, default, obs, "", self._write_question(idx))
        return self.deferred(agent, "write", space, default, obs, lambda: self._llm_write(agent, space, default, obs))

    def _write_question(self, idx: int) -> str:
        """What member `idx` is asked to write: a post for its forum, or a reply to the item it comments on."""
        kind, ref = self.pending[idx]
        if kind == "post":
            return tpl.WRITE_POST.substitute(forum=tpl.FORUMS[ref])
        return prompts.comment_question(self, self._feed_of(int(self.row[idx])).index(ref) + 1, ref)

    def _llm_write(self, agent: Member, space: Text, default: str, obs: dict[str, Any]) -> DecisionRequest:
        """An LLM member's write request with its prompt: its feed, and the question (`_request_write`)."""
        r = int(self.row[agent.idx])
        ids = self._feed_of(r)
        context = prompts.feed_context(self, agent, ids, tuple(self.feed_followed[r, : len(ids)].tolist()))
        return self.request(agent, "write", space, default, obs, context, self._write_question(agent.idx))

    def _request_stance(self, agent: Member) -> Optional[DecisionRequest]:
        """An LLM member's message's stance, read back from its text by the same model (persona-free)."""
        if agent.idx not in self.wrote or agent.policy != "llm":
            return None
        item = self.wrote[agent.idx]
        obs = {"message": self.items.text[item]}  # (an archetype's key: equal messages are read once)
        return self.deferred(agent, "stance", STANCE_SPACE, "neutral", obs, lambda: DecisionRequest(
            agent_id=agent.unique_id, tick=self.tick, phase="stance", space=STANCE_SPACE, default="neutral",
            backend=agent.backend, strategy=agent.strategy, observation=obs, context=prompts.stance_context(self, item),
            question=tpl.STANCE_QUESTION, seed=self.seeds.seed_for(self.tick, agent.unique_id, "stance")))

    # ----- acting -------------------------------------------------------------------------------------
    def act(self, phase: str, decisions: Sequence[Decision]) -> None:
        _ACTS[phase](self, decisions)

    def _act_choose(self, decisions: Sequence[Decision]) -> None:
        for d in decisions:
            self._apply_choice(d)
        self.seen_up[self.readers] = 0  # members have now been shown what they got
        self.seen_down[self.readers] = 0
        self.seen_replies[self.readers] = 0
        self._count_responses()

    def _act_write(self, decisions: Sequence[Decision]) -> None:
        for d in decisions:
            self._apply_text(d)
        if "stance" not in self.phases():
            self._publish()

    def _act_stance(self, decisions: Sequence[Decision]) -> None:
        """Each message takes the stance read back from its text, and so does its author's opinion."""
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
        if self.members[idx].remembers:  # (a scripted member keeps no memory: its note is not even written)
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

    def reward_components(self) -> dict[str, dict[int, float]]:
        """The community's feedback on each member's writing this tick (non-zero counts only)."""
        return nonzero(self.uid, (("upvotes", self.got_up), ("downvotes", self.got_down), ("replies", self.got_replies)))

    def scenario_metrics(self) -> dict[str, Optional[float]]:
        return report.tick_metrics(self)

    def final_metrics(self) -> dict[str, Optional[float]]:
        return report.run_metrics(self)

    def initial_state(self) -> dict[str, Any]:
        """The seeded follow graph as [follower, followee] agent ids: the events carry only the run's changes."""
        uid = self.uid.tolist()
        return {"follows": [[uid[u], uid[v]] for u, v in self.graph.edges]}

    def state(self) -> dict[str, Any]:
        """Aggregates only: per-member actions are in agent_steps, messages in events."""
        hist = np.histogram(self.opinion, bins=10, range=(0.0, 1.0))[0]
        return {"follow_edges": self.n_edges, "items": self.items.n, "active": int(self.readers.size),
                "opinion_histogram": hist.tolist()}


#: what each phase asks a member, and how the phase's decisions apply
_REQUESTS: dict[str, Callable[[SocialModel, Member], Optional[DecisionRequest]]] = {
    "choose": SocialModel._request_choose, "write": SocialModel._request_write, "stance": SocialModel._request_stance,
}
_ACTS: dict[str, Callable[[SocialModel, Sequence[Decision]], None]] = {
    "choose": SocialModel._act_choose, "write": SocialModel._act_write, "stance": SocialModel._act_stance,
}
