"""Every registered scenario keeps the platform's contract (the conformance kit, societas.testing), and the kit
catches scenarios that break it."""

from __future__ import annotations

import random

import pytest
from pydantic import Field

from sim.contracts.agent import SocietyAgent
from scenarios import REGISTRY
from sim.core.spaces import Number
from societas.testing import ConformanceError, FakeLLM, check_scenario
from sim.tick.config import ScenarioConfig
from sim.tick.model import SocietyModel


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_registered_scenario_passes_the_conformance_kit(name, store):
    """Declared, stored, reproducible, seeded, resumable, batched and checked, replayable."""
    report = check_scenario(name, store=store)
    assert report.passed[:3] == ["declared", "stored", "reproducible"]
    assert {"resumable", "batched and checked", "replayable"} <= set(report.passed)
    assert "seeded" in report.passed or "random" not in REGISTRY[name].strategies  # market: random_match


# ----- scenarios that break the contract: the kit must say which rule ------------------------------------
class CoinConfig(ScenarioConfig):
    players: int = Field(3, ge=1)
    rounds: int = Field(4, ge=1)
    strategy: str = "give"


def _give(request, rng):
    return float(rng.randint(0, 5))


class Coins(SocietyModel):
    """Each round every player gives 0-5 coins; the payoff is what it kept."""

    name = "coins_test"
    Config = CoinConfig
    horizon_field = "rounds"
    strategies = {"give": _give, "random": _give}
    default_strategy = "give"
    tick_metric_docs = {"given": "coins given this round"}
    final_metric_docs = {"given_total": "coins given over the run"}

    def setup(self):
        self.given = self.total = 0.0
        for policy, strategy, persona in self.population_plan(self.config.players):
            SocietyAgent(self, policy=policy, strategy=strategy, persona=persona)

    def observe(self, agent, phase):
        return self.request(agent, phase, Number(0, 5, 1), 0.0, {}, "A game of coins.", "How many coins do you give?")

    def act(self, phase, decisions):
        self.given = sum(float(d.value) for d in decisions)
        self.total += self.given

    def payoffs(self):
        return {a.unique_id: 1.0 for a in self.agents}

    def scenario_metrics(self):
        return {"given": self.given}

    def final_metrics(self):
        return {"given_total": self.total}


class Undocumented(Coins):
    def scenario_metrics(self):
        return {"given": self.given, "secret": 1.0}


class GlobalRandom(Coins):
    """Draws from the process's global generator: not reproducible from the seed."""

    def payoffs(self):
        return {a.unique_id: random.random() for a in self.agents}


class BadHorizon(Coins):
    horizon_field = "players_typo"


def test_a_well_behaved_scenario_passes(store):
    report = check_scenario(Coins, store=store)
    assert report.passed == ["declared", "stored", "reproducible", "seeded", "resumable", "batched and checked",
                             "replayable"]


@pytest.mark.parametrize("cls,rule", [(Undocumented, "stored"), (GlobalRandom, "reproducible"),
                                      (BadHorizon, "declared")])
def test_the_kit_names_the_rule_a_scenario_breaks(cls, rule, store):
    with pytest.raises(ConformanceError, match=f"{cls.name}: {rule}:"):
        check_scenario(cls, store=store)


def test_the_fake_llm_answers_in_space_but_every_fourth():
    """The fake answers from the request seed (the same request, the same answer), garbage every 4th."""
    from sim.core.contracts import DecisionRequest

    reqs = [DecisionRequest(agent_id=i, tick=1, phase="p", space=Number(0, 5, 1), default=0.0, seed=i) for i in range(8)]
    a, b = FakeLLM().answer(reqs, [[]] * 8), FakeLLM().answer(reqs, [[]] * 8)
    assert [x.value for x in a] == [x.value for x in b]
    bad = [i for i, x in enumerate(a) if not isinstance(x.value, float)]
    assert bad == [0, 4] and all(0 <= x.value <= 5 for i, x in enumerate(a) if i not in bad)
