"""The plain Mesa yardsticks of benchmarks/engine.py reproduce the engine's figures, so their ratios measure the engine."""

import pytest

from benchmarks.engine import PLAIN, check
from benchmarks.plain import commons


@pytest.mark.parametrize("scenario", sorted(PLAIN))
def test_each_plain_mesa_model_reproduces_the_engines_figures_tick_by_tick(scenario):
    """On its check config every plain model gives the engine's per-tick figures (rationing, generations, feeds...)."""
    assert check(scenario) >= 12


def test_a_plain_model_whose_rules_differ_is_caught(monkeypatch):
    """The check fails, naming the tick and figure, when a plain model's rules differ (here the lake regrows less)."""
    sets, make, ticks, keys = commons.check()

    def slower(seed):
        model = make(seed)
        model.regrowth = 1.5
        return model

    monkeypatch.setitem(PLAIN, "commons", type("Broken", (), {"check": staticmethod(lambda: (sets, slower, ticks, keys))}))
    with pytest.raises(AssertionError, match="commons tick 2: plain stock"):
        check("commons")
