"""Reward modes, feedback and the norm ledger on hand-computed cases."""

import numpy as np
import pytest

from sim.reward import components
from sim.reward.norms import NormLedger
from sim.reward.rewards import RewardLayer, compute_rewards

PAYOFFS = {1: 10.0, 2: 4.0, 3: 1.0}


def test_private_reward_is_own_payoff():
    assert compute_rewards(PAYOFFS, "private") == PAYOFFS


def test_integrated_adds_lambda_times_mean_of_others():
    """r_1 = 10 + 0.5 * (4 + 1) / 2 = 11.25; r_3 = 1 + 0.5 * 7 = 4.5."""
    r = compute_rewards(PAYOFFS, "integrated", lam=0.5)
    assert r[1] == pytest.approx(11.25)
    assert r[2] == pytest.approx(4.0 + 0.5 * 5.5)
    assert r[3] == pytest.approx(4.5)


def test_cooperative_is_group_mean():
    assert compute_rewards(PAYOFFS, "cooperative") == {1: 5.0, 2: 5.0, 3: 5.0}


def test_unknown_mode_names_the_valid_ones():
    with pytest.raises(ValueError, match="private, integrated, cooperative"):
        compute_rewards(PAYOFFS, "selfish")  # type: ignore[arg-type]


def test_feedback_sparse_vs_dense():
    """Sparse feedback shows only the own reward; dense adds the group's metrics."""
    rewards = {1: 2.0, 2: 3.0}
    metrics = {"equality": 0.9, "stock": 40.0}
    assert RewardLayer(feedback="sparse").feedback_for(1, rewards, metrics) == {"reward": 2.0}
    assert RewardLayer(feedback="dense").feedback_for(1, rewards, metrics) == {"reward": 2.0, "equality": 0.9, "stock": 40.0}


def test_norm_ledger_records_and_counts():
    """Statements, compliance, violations and sanctions become events and counts; flush resets the tick."""
    ledger = NormLedger()
    ledger.statement(1, "limit", {"max": 10}, "catch at most 10")
    ledger.compliance(1, "limit", catch=8)
    ledger.violation(2, "limit", catch=15)
    ev = ledger.sanction(1, 2, "limit", cost=1.0, fine=3.0)
    assert ev.kind == "norm.sanction" and ev.actor == 1 and ev.target == 2 and ev.data["fine"] == 3.0
    assert ledger.tick_counts() == {"statement": 1, "adoption": 0, "compliance": 1, "violation": 1, "sanction": 1}
    assert ledger.sanctioned() == {2}
    assert len(ledger.flush()) == 4
    assert ledger.tick_counts()["sanction"] == 0 and ledger.totals["sanction"] == 1


@pytest.mark.parametrize("kind", ["normal", "integers", "extremes", "tenths"])
def test_few_payoffs_give_the_same_inequity_bits_as_the_array_path(kind, monkeypatch):
    """Up to SMALL payoffs, envy and guilt are taken on Python floats; they are the array path's to the bit (signed
    zeros, ties, huge and subnormal payoffs included), so a stored reward vector does not depend on which ran."""
    rng = np.random.default_rng(len(kind))
    draw = {"normal": lambda n: rng.normal(size=n) * 10, "integers": lambda n: rng.integers(-3, 4, size=n) * 1.0,
            "extremes": lambda n: rng.choice([0.0, -0.0, 1.5, -2.25, 1e300, -1e300, 5e-324], size=n),
            "tenths": lambda n: np.round(rng.random(n) * 3, 1) * rng.choice([1, -1], size=n)}[kind]
    small = components.SMALL
    for _ in range(1500):
        x = draw(int(rng.integers(2, small + 1)))
        few = components.inequity_columns(x)
        monkeypatch.setattr(components, "SMALL", 0)
        arrays = components.inequity_columns(x)
        monkeypatch.setattr(components, "SMALL", small)
        assert [c.tobytes() for c in few] == [c.tobytes() for c in arrays], x.tolist()
