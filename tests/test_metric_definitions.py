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
    limit = getattr(config, "months", None) or getattr(config, "max_steps", None)
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
