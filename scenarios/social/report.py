"""What the community reports: each tick's figures (activity, the follow graph, discourse, opinions) and the run's,
with their meaning and units, computed from the model's state (the metric functions themselves are in
`scenarios.social.metrics`). The run's edition says how opinion clusters are counted (scenarios.social.editions).
The expensive network metrics are taken every `metric_every` ticks (and the first and last), on samples.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

import numpy as np

from scenarios.social import metrics as M
from sim.core.rng import derive_seed

if TYPE_CHECKING:
    from scenarios.social.model import SocialModel

#: where MoltBook's own figures come from: Holtz, "The Anatomy of the Moltbook Social Graph" (arXiv 2602.10131), its
#: analysis code and table at this commit (each figure computed here as that code computes it: `moltbook_figures`)
HOLTZ = "daveholtz/moltbook_scraper@37dec4f4"
#: published values for a real network of AI agents, shown beside a run's (see analysis/reference.py). The follow
#: graph's reciprocity is not among them: it is an input here (the seeded graph's `follow_back`), and MoltBook's API
#: exposes no follower graph; its 0.197 is the reply network's
REFERENCE = {
    "reply_reciprocity": {"value": 0.197, "source": f"MoltBook reply network ({HOLTZ} analysis/R/02_structural.R 150-189; "
                                                    "latex/moltbook_analysis.tex 216)",
                          "set_by": "emerges: who comments on whose posts and comments"},
    "comments_per_post": {"value": 8.29, "source": f"MoltBook 115,031 comments / 13,875 posts ({HOLTZ} "
                                                    "latex/moltbook_analysis.tex 154-155)",
                          "set_by": "emerges: the members' choices between posting and commenting (post_rate, strategies)"},
    "direct_replies_per_post": {"value": 7.70, "source": f"MoltBook mean direct replies per post ({HOLTZ} "
                                                         "analysis/R/03_conversation.R 155-164; tex 250)",
                                "set_by": "emerges: as comments_per_post"},
    "comment_depth_mean": {"value": 1.07, "source": f"MoltBook ({HOLTZ} analysis/R/03_conversation.R 28-77; tex 244)",
                           "set_by": "emerges"},
    "duplicate_share": {"value": 0.341, "source": f"MoltBook 34.1% exact duplicates ({HOLTZ} analysis/R/04_lexical.R "
                                                  "83-90; tex 281)",
                        "set_by": "emerges, driven by an input: the broadcasters' share of the population (they always post "
                                  "the same greeting)"},
    "activity_gini": {"value": 0.839, "source": f"MoltBook activity Gini, posts + comments of active agents ({HOLTZ} "
                                                "analysis/R/02_structural.R 28-34; tex 158)",
                      "set_by": "mostly an input: activity_skew spreads the members' activity rates"},
    "participation_gini_authors": {"value": 0.84, "source": "MoltBook posting Gini among authors, arXiv 2603.16128 "
                                                            "(Reddit: 0.47)", "reddit": 0.47,
                                   "set_by": "emerges (mostly set by activity_skew and post_rate)"},
}
TICK_METRIC_DOCS = {
    "active": "members active this tick (each with its own activity rate)",
    "posts": "posts written this tick", "comments": "comments written this tick",
    "upvotes": "upvotes this tick", "downvotes": "downvotes this tick",
    "follows": "new follows this tick", "unfollows": "unfollows this tick", "idle": "active members who did nothing",
    "follow_edges": "follow edges after this tick",
    "reciprocity": "share of follow edges u->v whose reverse exists (networkx overall_reciprocity); an input: the seeded "
                   "graph's follow_back (MoltBook's 0.197 is the reply network's: the final reply_reciprocity)",
    "indegree_gini": "Gini of the members' follower counts (in-degree)",
    "top1_indegree_share": "share of all follows held by the top 1% of members by followers",
    "participation_gini": "Gini of posts per member so far, over all members",
    "comment_depth_mean": "mean depth of this tick's comments (1 = reply to a post)",
    "comments_unreplied_share": "share of all comments so far that have no reply",
    "duplicate_share": "share of this tick's messages whose exact text already occurred in the run (a repeat count; "
                       "the run's figure counts as MoltBook does)",
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
FINAL_METRIC_DOCS = {
    "posts_total": "posts over the run", "comments_total": "comments over the run",
    "upvotes_total": "upvotes over the run", "downvotes_total": "downvotes over the run",
    "follows_total": "follows over the run", "unfollows_total": "unfollows over the run",
    "idle_total": "active member-ticks with no action", "messages_total": "posts + comments over the run",
    "follow_edges": "follow edges at the end",
    "reciprocity": "share of final follow edges whose reverse exists: an input (the seeded graph's follow_back), not "
                   "MoltBook's 0.197 (that is reply_reciprocity)",
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
    "duplicate_share": "MoltBook's exact duplicates (34.1%): share of all messages whose lower-cased, whitespace-squeezed "
                       "text occurs more than once in the run, every copy counted (runs before contract 8: the share whose "
                       "exact text occurred earlier, repeats after the first)",
    "reply_reciprocity": "MoltBook's reciprocity (0.197): the reply network (an edge from each comment's author to the "
                         "author of its parent comment or post; self-replies dropped, repeated edges once), share of edges "
                         "whose reverse exists; null without edges (contract 8 on)",
    "reply_edges": "edges of that reply network (how thin it is; MoltBook: 70,145) (contract 8 on)",
    "comments_per_post": "comments / posts over the run (MoltBook 115,031 / 13,875 = 8.29) (contract 8 on)",
    "direct_replies_per_post": "comments on a post (depth 1) / posts, all posts counted (MoltBook 7.70) (contract 8 on)",
    "activity_gini": "Gini of posts + comments per member, over members with at least one (MoltBook 0.839) "
                     "(contract 8 on)",
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
COMPONENT_DOCS = {
    "upvotes": "upvotes the member's posts and comments received this tick",
    "downvotes": "downvotes the member's posts and comments received this tick",
    "replies": "replies the member's posts and comments received this tick (the social reward: attention)",
}
UNITS = {"follow_edges": "edges", "state.follow_edges": "edges", "posts": "posts", "comments": "comments",
                "upvotes": "votes", "downvotes": "votes", "follows": "follows", "unfollows": "follows",
                "active": "members", "idle": "members", "payoff": "feedback points"}


def network_metrics(model: "SocialModel") -> dict[str, Optional[float]]:
    """The expensive ones, on samples: clustering, power-law fit of total degree, mean shortest path."""
    c, n = model.config, model.config.agents
    rng = np.random.default_rng(derive_seed(model.seed, "metrics", model.tick))
    sample = rng.choice(n, size=min(n, c.metric_sample), replace=False)
    sources = rng.choice(n, size=min(n, c.path_sources), replace=False)
    fit = M.powerlaw_fit(M.total_degrees(model.graph, n))
    return {
        "clustering": M.undirected_clustering(model.graph, sample.tolist()),
        "degree_powerlaw_alpha": fit["alpha"], "degree_powerlaw_ks": fit["ks"], "degree_powerlaw_xmin": fit["xmin"],
        "mean_shortest_path": M.mean_shortest_path(model.graph, sources.tolist()),
    }


def opinion_metrics(model: "SocialModel") -> dict[str, Optional[float]]:
    """The opinions' mean, variance (polarisation), bimodality and clusters."""
    x, c = model.opinion, model.config
    out = {"opinion_mean": float(x.mean()), "opinion_variance": float(x.var()),
           "opinion_bimodality": M.bimodality_coefficient(x)}
    out.update(model.edition.clusters(x, c.cluster_gap, c.epsilon))
    return out


def tick_metrics(model: "SocialModel") -> dict[str, Optional[float]]:
    """This tick's figures (and, every `metric_every` ticks, the expensive network metrics, kept for the run's)."""
    it = model.items
    edges = model.n_edges
    texts = [it.text[i] for i in model.tick_items]
    posts = [it.text[i] for i in model.tick_items if it.parent[i] < 0]
    comments = [i for i in model.tick_items if it.parent[i] >= 0]
    conv = M.template_convergence(posts)
    if conv is not None:
        model.convergence.append(conv)
    out: dict[str, Optional[float]] = {
        "active": float(model.readers.size), **{k: float(v) for k, v in model.counts.items()},
        "follow_edges": float(edges), "reciprocity": model.mutual / edges if edges else 0.0,
        "indegree_gini": M.gini(model.in_deg), "top1_indegree_share": M.top_share(model.in_deg, 0.01),
        "participation_gini": M.gini(model.posts_by),
        "comment_depth_mean": M.mean_or_none(it.depth[comments]),
        "comments_unreplied_share": M.unreplied_share(it.replies[: it.n][it.comments()]),
        "duplicate_share": M.duplicate_share(texts, model.texts_seen),
        "template_convergence": conv, "echo_chamber": model.echo,
        **opinion_metrics(model),
    }
    if model.tick == 1 or model.tick % model.config.metric_every == 0 or model.tick == model.config.ticks:
        model.expensive = network_metrics(model)
        out.update(model.expensive)
    return out


def moltbook_figures(model: "SocialModel") -> dict[str, Optional[float]]:
    """The run's figures as MoltBook's analysis code computes them (`HOLTZ`): exact duplicates (every copy of a
    squished text seen more than once), the reply network's reciprocity and size, comments and direct replies per
    post, and the activity Gini (posts + comments, active members)."""
    it = model.items
    n = it.n
    parents = it.parent[:n]
    edges = M.reply_edges(it.author[:n], parents)
    posts = int((parents < 0).sum())
    activity = model.posts_by + model.comments_by
    active = activity[activity > 0]
    return {
        "duplicate_share": M.copies_share(it.text),
        "reply_reciprocity": M.edge_reciprocity(edges), "reply_edges": float(len(edges)),
        "comments_per_post": (n - posts) / posts if posts else None,
        "direct_replies_per_post": float((it.depth[:n] == 1).sum()) / posts if posts else None,
        "activity_gini": M.gini(active) if active.size else None,
    }


def run_metrics(model: "SocialModel") -> dict[str, Optional[float]]:
    """The run's figures: activity totals, the final graph, discourse, opinions, and responsiveness to reward."""
    it = model.items
    edges = model.n_edges
    comments = it.comments()
    authors = model.posts_by[model.posts_by > 0]
    upvoted = M.rate(model.response[1], model.response[0])
    ignored = M.rate(model.response[3], model.response[2])
    return {
        **{f"{k}_total": float(v) for k, v in model.totals.items()},
        "messages_total": float(it.n),
        "follow_edges": float(edges), "reciprocity": model.mutual / edges if edges else 0.0,
        "indegree_gini": M.gini(model.in_deg), "top1_indegree_share": M.top_share(model.in_deg, 0.01),
        **model.expensive,
        "participation_gini": M.gini(model.posts_by),
        "participation_gini_authors": M.gini(authors) if authors.size else None,
        "comment_depth_mean": M.mean_or_none(it.depth[: it.n][comments]),
        "comments_unreplied_share": M.unreplied_share(it.replies[: it.n][comments]),
        **model.edition.compared(model),
        "template_convergence": float(np.mean(model.convergence)) if model.convergence else None,
        "echo_chamber": M.rate(model.exposure[0], model.exposure[1]),
        **opinion_metrics(model),
        "opinion_shift": float(np.abs(model.opinion - model.opinion0).mean()),
        "post_rate_after_upvoted": upvoted, "post_rate_after_ignored": ignored,
        "reward_responsiveness": upvoted - ignored if upvoted is not None and ignored is not None else None,
    }
