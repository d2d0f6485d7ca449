"""The metric definitions corrected against the papers (issue 24), each beside the old one.

Every test shows the old definition's wrong figure under decision contract 5 (which stored runs keep, so
they replay) and the corrected figure under the current contract (6). The corrected definitions are listed
in docs/metrics.md.
"""

from __future__ import annotations

import numpy as np
import pytest

from agents.scripted import ScriptedBackend
from analysis import compare as cmp
from sim.reward.intervals import mean_interval
from scenarios.commons.legacy import first_stated_amount
from scenarios.commons.limits import stated_limit
from scenarios.commons.model import CommonsConfig, CommonsModel
from scenarios.market import data as mdata
from scenarios.market import measures
from scenarios.market.config import MarketConfig
from scenarios.market.model import MarketModel
from scenarios.social import metrics as SM
from sim.core.profiles import CONTRACT
from sim.tick.broker import DecisionBroker

OLD = 5


def _run(model_cls, config, *, contract: int, seed: int = 0):
    records: list = []
    model = model_cls(config, seed=seed, broker=DecisionBroker({"scripted": ScriptedBackend(model_cls.strategies)}),
                      on_tick=records.append, contract=contract)
    limit = getattr(config, "months", None) or getattr(config, "max_steps", None) or getattr(config, "ticks", None)
    while model.running and model.tick < limit:
        model.step()
    model.records = records
    return model


def test_the_current_contract_carries_the_corrected_definitions():
    assert CONTRACT > OLD


def test_a_proposal_is_the_amount_to_catch_not_the_first_number():
    text = "The lake has 100 tons, so let us each catch 5."
    assert first_stated_amount(text) == 100  # the old reading: the first "N tons"
    assert stated_limit(text) == 5
    assert stated_limit("There are 80 tons in the lake; 12 tons each is fair.") == 12
    assert stated_limit("100 tons are left.") is None
    assert stated_limit("Only 30 tons remain, I will take 3.") == 3
    assert stated_limit("5 tons is fine for me") == 5
    assert stated_limit("I think 2.5 tons is fair.") == 2.5  # a decimal point ends no clause
    assert stated_limit("The lake regrows 25 tons a month, so let us each catch 4.") == 4
    assert stated_limit("Last month we caught 12 tons each; I propose 8.") == 8


def test_efficiency_over_months_survived_is_not_capped_on_a_collapsed_run():
    config = CommonsConfig(fishers=5, months=12, strategy="greedy")
    old, new = (_run(CommonsModel, config, contract=c).summary() for c in (OLD, CONTRACT))
    assert old["collapsed"] == new["collapsed"] == 1.0
    assert old["efficiency_survived"] == 1.0  # capped: a collapse read as perfect efficiency
    assert new["efficiency_survived"] > 1.0  # the fishers caught faster than the lake regrows
    assert new["efficiency"] == old["efficiency"] <= 1.0


def _month_and_run_over_usage(model) -> tuple[float, float]:
    per_tick = [r.metrics["over_usage"] for r in model.records]
    return float(np.mean(per_tick)), model.summary()["over_usage"]


def test_over_usage_judges_the_chosen_catch_each_month_as_over_the_run():
    """With rationing, a fisher may land less than the sustainable share though it chose more: the month's
    figure judged the landed catch, the run's the chosen one, so the two disagreed."""
    config = CommonsConfig(fishers=40, months=3, strategy="fixed", catch=10, start_fraction=0.3)
    old = _run(CommonsModel, config, contract=OLD)
    ticks_old, final_old = _month_and_run_over_usage(old)
    assert ticks_old != pytest.approx(final_old)  # every fisher acts every month, so they should agree
    new = _run(CommonsModel, config, contract=CONTRACT)
    ticks_new, final_new = _month_and_run_over_usage(new)
    assert ticks_new == pytest.approx(final_new) == pytest.approx(1.0)


def test_perolat_metrics_are_over_material_payoffs_not_shaped_rewards():
    """The same catches under the private and the integrated (λ = 1) reward: Perolat's U is the same society."""
    def perolat(contract: int, mode: str) -> dict:
        config = CommonsConfig(fishers=5, months=6, strategy="random", reward_mode=mode, lam=1.0)
        return _run(CommonsModel, config, contract=contract, seed=3).summary()

    old_private, old_integrated = perolat(OLD, "private"), perolat(OLD, "integrated")
    assert old_private["total_gain"] == old_integrated["total_gain"]  # the same catches
    assert old_integrated["perolat_efficiency"] != pytest.approx(old_private["perolat_efficiency"])
    new_private, new_integrated = perolat(CONTRACT, "private"), perolat(CONTRACT, "integrated")
    for name in ("perolat_efficiency", "perolat_equality", "perolat_sustainability"):
        assert new_integrated[name] == new_private[name]
    assert new_private["perolat_efficiency"] == pytest.approx(new_private["total_gain"] / new_private["survival_time"])


def test_the_welfare_ratio_stays_at_most_one_when_businesses_discount():
    config = MarketConfig(market="synthetic", customers_n=20, businesses_n=30, customers="optimal",
                          businesses="discount", search="optimal")
    old, new = (_run(MarketModel, config, contract=c).summary() for c in (OLD, CONTRACT))
    assert old["welfare"] == new["welfare"]
    assert old["welfare_ratio"] > 1.0  # against the optimum at menu prices
    assert new["optimal_welfare_at_floor"] > new["optimal_welfare"]
    assert new["welfare_ratio"] <= 1.0 + 1e-12
    honest = _run(MarketModel, config.model_copy(update={"businesses": "honest"}), contract=CONTRACT).summary()
    assert honest["optimal_welfare_at_floor"] == honest["optimal_welfare"]  # nobody may discount


@pytest.mark.skipif(mdata.default_data_dir() is None, reason="Magentic data not found (../shared/data/magentic)")
def test_the_random_match_median_lands_in_the_published_interval():
    """mexican_10_30: the published pick_any median is 64.2 [59.9, 68.5]; 200 draws gave 49.9."""
    config = MarketConfig(market="mexican_10_30", max_steps=1)
    model = _run(MarketModel, config, contract=CONTRACT)
    published = model.market.baselines["pick_any_baseline"]
    old = _run(MarketModel, config, contract=OLD).summary()["baseline_any_median"]
    new = model.summary()
    assert not published["median_ci_lower"] <= old <= published["median_ci_upper"]
    assert new["baseline_draws"] == measures.baseline_draws(10) == 20_000
    assert published["median_ci_lower"] <= new["baseline_any_median"] <= published["median_ci_upper"]


def test_opinion_clusters_count_major_clusters_and_say_when_none_formed():
    spread = np.random.default_rng(1).uniform(0, 1, 500)
    assert SM.opinion_clusters(spread, 0.05, 0.01) == 1  # the old definition: a spread read as consensus
    got = SM.opinion_groups(spread, gap=0.05, width=0.2)
    assert got == {"major": 0.0, "minor": 0.0, "unclustered_share": 1.0}

    rng = np.random.default_rng(2)
    two = np.concatenate([0.2 + rng.normal(0, 0.01, 22), 0.8 + rng.normal(0, 0.01, 22),
                          [0.5, 0.02, 0.99], 0.4 + rng.normal(0, 0.002, 3)])  # 50: two camps, a pair-ish group, loners
    assert SM.opinion_clusters(two, 0.05, 0.01) == 6  # every singleton counted as a cluster below 100 members
    got = SM.opinion_groups(two, gap=0.05, width=0.2)
    assert got["major"] == 2 and got["minor"] == 1 and got["unclustered_share"] == pytest.approx(3 / 50)


def test_intervals_never_leave_a_metric_s_bounds():
    survived = [1, 1, 1, 1, 0]
    old_hi = np.mean(survived) + 2.776 * np.std(survived, ddof=1) / np.sqrt(5)
    assert old_hi > 1  # the t interval of a rate: 0.80 +/- 0.56
    rate = cmp.mean_ci(survived, "survival_rate")
    assert rate["method"] == "wilson" and 0 <= rate["lo"] < 0.8 < rate["hi"] <= 1
    # a count that happens to be 0 or 1 in every run is not a rate: no Wilson cap at 1
    assert cmp.mean_ci([0, 1, 1, 1, 1], "opinion_clusters")["method"] == "bootstrap"
    # differences are symmetric in sign: one seed of twenty moving either way is no effect
    up, down = mean_interval([0.0] * 19 + [1.0]), mean_interval([0.0] * 19 + [-1.0])
    assert up["lo"] <= 0 <= up["hi"] and down["lo"] <= 0 <= down["hi"] and up["lo"] == -down["hi"]
    resources = [-10.0, 55.0, 60.0, 70.0]
    ci = mean_interval(resources)
    assert ci["method"] == "bootstrap" and -10 <= ci["lo"] < ci["mean"] < ci["hi"] <= 70
    assert mean_interval(resources) == ci  # seeded: the same runs give the same interval
    assert mean_interval([3.0])["lo"] is None and mean_interval([None, float("nan")])["n"] == 0
    assert mean_interval([2.5, 2.5])["lo"] == mean_interval([2.5, 2.5])["hi"] == 2.5


# ----- decision contract 8 (issue 36): the limit a message concludes with; MoltBook's figures as its code counts them --
_BEFORE_8 = 7
#: (message, the limit it states): written by hand before the parser (the researcher's 71 sentences, issue 36)
STATED = [
    ("We have 60 tons; half must stay. So 6 each.", 6), ("No more than ten tons each.", 10),
    ("at most 10% of the fish, i.e. 8 tons", 8), ("Let's each catch at most 10% of the fish.", None),
    ("I propose we each catch at most 10 tons.", 10), ("The lake has 100 tons, so let us each catch 5.", 5),
    ("The lake regrows 25 tons a month.", None), ("100 tons are left.", None), ("I think 2.5 tons is fair.", 2.5),
    ("It is month 2 and I am fisher 3.", None), ("Let's all catch twelve tons.", 12),
    ("Twenty-five tons each would empty the lake.", None), ("Each of us should take no more than eight.", 8),
    ("Last month I caught 30 tons; this month I will catch 10.", 10),
    ("We caught 40 tons in total, so let's keep it to 8 tons each.", 8),
    ("Catch 10 tons each, so that 50 tons stay in the lake.", 10), ("Let's limit ourselves to 9 tons per fisher.", 9),
    ("A quota of 7 tons per person sounds fair.", 7), ("Nobody should fish more than 10 tons.", 10),
    ("If anyone catches more than 15 tons, the lake will collapse.", None),
    ("If we all catch 10 tons each, the lake will stay full.", 10), ("I'll take 20 tons, not 10.", 20),
    ("Let's catch 8 instead of 12 tons.", 8), ("I suggest we each catch between 5 and 10 tons.", 10),
    ("5-10 tons each is fine.", 10), ("We should leave at least 50 tons in the lake.", None),
    ("I agree with John: 10 tons each.", 10), ("I agree, let's stick to 10.", 10), ("Sounds good.", None),
    ("We earn $1,000 per ton, so catching 10 tons earns $10,000.", 10),
    ("There are 5 of us and 100 tons, so 10 tons each keeps the lake full.", 10),
    ("Everyone catch 10, except me: I need 20.", 10), ("Month 3: I will fish 6 tons.", 6),
    ("I propose a limit of 10 tons per fisher, which is 50 tons in total.", 10),
    ("Let's cut our catch by half, to 5 tons.", 5), ("Catch 10.", 10),
    ("A dozen tons each is too much; six each is better.", 6),
    ("I will catch 0 tons this month to let the lake recover.", 0), ("Let's all catch zero this month.", 0),
    ("Ten tons is my limit.", 10), ("We are five fishers, so ten each.", 10), ("Fisher 2 should catch 10 tons.", 10),
    ("At most 10 tons each for the next 3 months.", 10), ("We caught 100 tons altogether last month.", None),
    ("I'd say 7 or 8 tons each.", 8), ("Let's each catch 10 tonnes.", 10), ("I'll stick with 1 ton.", 1),
    ("Only 2.5 tons each, please.", 2.5), ("10,000 dollars is what I want.", None),
    ("No one should catch more than twenty tons.", 20), ("Let's catch 10t each.", 10),
    ("The group's agreed limit is 100 tons per fisher.", 100),
    ("We should each catch 10 tons; if we catch 20 the lake collapses.", 10),
    ("Let's catch 10 tons each, and next month maybe 12.", 10), ("I caught 20, but I will only take 5 from now on.", 5),
    ("Let's keep our catch under 12 tons each.", 12), ("I propose five tons each, since the lake holds 60.", 5),
    ("One ton each is enough for now.", 1), ("No one needs more than fifteen.", 15),
    ("Each of us takes 8, which leaves 60 tons to regrow.", 8),
    ("We have 100 tons and 5 fishers, so 50 tons can go: 10 each.", 10),
    ("Ninety tons would be too many for one month.", None), ("Let's each catch at most 20 percent of the lake.", None),
    ("I want 100 tons!", 100), ("I propose 8; last month we caught 12 tons each.", 8),
    ("Last month we caught 12 tons each; I propose 8.", 8),
    ("As one of 3 fishers, I propose each of us catches at most 8 tons.", 8), ("Only 30 tons remain, I will take 3.", 3),
    ("The lake regrows 25 tons a month, so let us each catch 4.", 4), ("Catch 10.5 tons.", 10.5), ("", None),
]


@pytest.mark.parametrize("text, expected", STATED)
def test_a_stated_limit_is_the_amount_a_message_concludes_with(text, expected):
    """Number words, percentages, money, counts of people and warnings read as a person reads them."""
    got = stated_limit(text)
    assert got is None if expected is None else got == expected


def test_the_sentences_the_issue_names_were_misread_before_contract_8():
    """Runs made before contract 8 read the first phrase (`first_phrased_limit`): they keep that reading."""
    from scenarios.commons.legacy import first_phrased_limit

    assert [first_phrased_limit(t) for t in ("We have 60 tons; half must stay. So 6 each.", "No more than ten tons each.",
                                             "at most 10% of the fish, i.e. 8 tons")] == [60, None, 10]
    assert len(STATED) == 71 and sum(first_phrased_limit(t) != e for t, e in STATED) == 18


def test_a_stated_limit_reads_a_long_message_in_linear_time():
    """Untrusted text: a message of 200,000 characters built to make a regex backtrack is read in well under a second."""
    import time

    for text in ("at most " * 25_000, "catch only only only " * 10_000 + "x", "1 " * 100_000, "one, " * 40_000):
        started = time.perf_counter()
        stated_limit(text)
        assert time.perf_counter() - started < 2.0


def test_the_conversation_s_agreed_limit_follows_the_run_s_contract():
    """The compact conversation's median limit: under contract 7 a message stating "We have 60 tons; half must stay.
    So 6 each." agrees 60 (the first phrase), under the current contract 6."""
    from sim.core.contracts import Decision

    config = CommonsConfig(fishers=3, months=2, conversation_rounds=1)
    text = "We have 60 tons; half must stay. So 6 each."
    agreed = {}
    for contract in (_BEFORE_8, CONTRACT):
        model = CommonsModel(config, seed=0, broker=DecisionBroker({}), contract=contract)
        model.steps += 1
        model.act("converse1", [Decision(a, "converse1", text, "llm") for a in (1, 2, 3)])
        agreed[contract] = model.agreed
    assert agreed == {_BEFORE_8: 60.0, CONTRACT: 6.0}


def _social_items(pairs: list[tuple[int, int]]) -> tuple[list[int], list[int]]:
    """(authors, parents) of posts (parent -1) and comments, from (author, parent item) pairs."""
    return [a for a, _ in pairs], [p for _, p in pairs]


def test_moltbook_s_reciprocity_is_the_reply_network_s():
    """An edge from a comment's author to the author of what it replies to; self-replies dropped, repeats once; the share
    of edges whose reverse exists (daveholtz/moltbook_scraper analysis/R/02_structural.R 150-189)."""
    # items: 0 A's post, 1 B's post; B on 0 (B->A), A on 1 (A->B), B on 0 again (B->A once), C on 2 = B's comment (C->B),
    # A on 0 (self, dropped)
    authors, parents = _social_items([(0, -1), (1, -1), (1, 0), (0, 1), (1, 0), (2, 2), (0, 0)])
    edges = SM.reply_edges(authors, parents)
    assert edges == {(1, 0), (0, 1), (2, 1)}
    assert SM.edge_reciprocity(edges) == pytest.approx(2 / 3)
    assert SM.edge_reciprocity(SM.reply_edges([0, 0], [-1, 0])) is None  # only a self-reply: no edge


def test_moltbook_s_duplicates_count_every_copy_of_a_squished_text():
    """Lower-cased, whitespace squeezed, every copy of a text seen more than once counted (analysis/R/04_lexical.R
    83-90); the old figure counted repeats after the first, of the raw text."""
    texts = ["Hi", "hi ", "Hi  there", "hi there", "x"]
    assert SM.copies_share(texts) == pytest.approx(4 / 5) and SM.duplicate_share(texts) == 0.0
    assert SM.copies_share(["a", "a", "a", "b"]) == pytest.approx(3 / 4) and SM.duplicate_share(["a", "a", "a", "b"]) == 0.5
    assert SM.copies_share(["", ""]) is None  # empty texts are dropped before counting


def test_the_community_s_moltbook_figures_follow_the_run_s_contract():
    """Under contract 7 the run keeps its old duplicate share and no new figure; under 8, MoltBook's definitions,
    every figure within its bounds."""
    from scenarios.social.config import SocialConfig
    from scenarios.social.model import SocialModel

    config = SocialConfig(agents=60, ticks=15, post_rate=0.3)
    old, new = (_run(SocialModel, config, contract=c).summary() for c in (_BEFORE_8, CONTRACT))
    assert "reply_reciprocity" not in old and "comments_per_post" not in old
    assert new["posts_total"] == old["posts_total"] and new["comments_total"] == old["comments_total"]
    assert new["duplicate_share"] != old["duplicate_share"]
    assert new["comments_per_post"] == pytest.approx(new["comments_total"] / new["posts_total"])
    assert 0 <= new["direct_replies_per_post"] <= new["comments_per_post"]
    assert 0 <= new["reply_reciprocity"] <= 1 and new["reply_edges"] > 0 and 0 <= new["activity_gini"] < 1
