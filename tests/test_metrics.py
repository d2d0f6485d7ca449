"""Social metrics on hand-computed cases."""

import pytest

from sim.reward import metrics as m


def test_gini_hand_cases():
    """Gini is 0 for equal shares, (n-1)/n when one agent has everything, 0.25 for [1, 3]."""
    assert m.gini([5, 5, 5, 5]) == pytest.approx(0.0)
    assert m.gini([0, 0, 0, 10]) == pytest.approx(0.75)
    # mean abs difference over all ordered pairs / (2 * mean): (|1-3|*2/4) / (2*2) = 0.25
    assert m.gini([1, 3]) == pytest.approx(0.25)
    assert m.gini([]) == 0.0
    assert m.equality([1, 3]) == pytest.approx(0.75)


def test_efficiency_is_total_reward_per_step():
    """Perolat's U: (3 + 1 + 2 + 2) / 2 steps = 4."""
    assert m.efficiency([{1: 3, 2: 1}, {1: 2, 2: 2}]) == pytest.approx(4.0)


def test_sustainability_is_mean_time_of_positive_rewards():
    """Agent 1 rewarded at t=1,3 (mean 2); agent 2 at t=3 (mean 3): S = 2.5."""
    rewards = [{1: 1, 2: 0}, {1: 0, 2: 0}, {1: 1, 2: 4}]
    assert m.sustainability(rewards) == pytest.approx(2.5)
    assert m.sustainability([{1: 0}]) == 0.0


def test_peace_counts_unsanctioned_agents():
    """5 agents, 1 then 3 sanctioned: P = (4 + 2) / 2 = 3."""
    assert m.peace([1, 3], 5) == pytest.approx(3.0)


def test_perolat_bundle_keys():
    """The bundle carries all four metrics under stable names."""
    out = m.perolat([{1: 2.0, 2: 2.0}], [0], 2)
    assert out == {"perolat_efficiency": 4.0, "perolat_equality": 1.0, "perolat_sustainability": 1.0, "perolat_peace": 2.0}
