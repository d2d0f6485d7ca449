"""The community's config: the follow graph, the feed's ranking, bounded-confidence opinions, the members' activity
and strategies, the payoffs of attention, and how often the expensive network metrics are taken."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from scenarios.social import templates as tpl
from scenarios.social.graph import GENERATED, MAX_COMPLETE, edgelist_nodes
from sim.tick.config import ScenarioConfig

StrategyName = Literal["engaged", "lurker", "broadcaster", "random"]


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
