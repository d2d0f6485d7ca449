"""Every registered scenario keeps the platform's contract (the conformance kit, societas.testing), the kit
reports every rule a scenario breaks, and `societas check` runs it on a name or a file."""

from __future__ import annotations

import json
import random

import pytest
from pydantic import Field

from scenarios import REGISTRY
from sim.contracts.agent import SocietyAgent
from sim.core.spaces import Number
from sim.tick.config import ScenarioConfig
from sim.tick.model import SocietyModel
from societas.testing import RULES, ConformanceError, FakeLLM, check_scenario, run_checks
from tests.conftest import ROOT, cli


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


class Crashes(Coins):
    """Divides by zero at its second round."""

    def act(self, phase, decisions):
        super().act(phase, decisions)
        if self.tick == 2:
            self.given = 1 / 0


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


# ----- the kit as a command, and its example scenarios ----------------------------------------------------------
BROKEN = "scenarios.examples.broken:BrokenCoins"


def test_the_example_scenario_keeps_every_rule(store):
    """scenarios.examples.coins, a whole scenario in one file written as a user's, passes every rule."""
    report = run_checks("scenarios.examples.coins:Coins", store=store)
    assert report.ok and report.passed == list(RULES) and not report.skipped


def test_the_broken_example_is_reported_for_every_rule_it_breaks(store):
    """Every rule the broken example breaks is reported with what broke it, not only the first; the rest hold."""
    report = run_checks(BROKEN, store=store)
    assert set(report.failed) == {"stored", "reproducible", "resumable", "replayable"}
    assert report.passed == ["declared", "seeded", "batched and checked"] and not report.not_checked
    assert any("'luck'" in why for why in report.failed["stored"])
    with pytest.raises(ConformanceError) as caught:
        check_scenario(BROKEN, store=store)
    assert [line.split(": ")[1] for line in str(caught.value).splitlines()] == ["stored", "reproducible", "resumable",
                                                                               "replayable"]


def test_a_broken_declaration_leaves_the_other_rules_unchecked(store):
    """A scenario whose declaration is broken fails `declared`; the rules that need a run are reported as not checked."""
    report = run_checks(BadHorizon, store=store)
    assert list(report.failed) == ["declared"] and list(report.not_checked) == list(RULES[1:]) and not report.ok
    assert store.list_runs() == []  # nothing was run


def test_a_crash_in_the_scenario_fails_the_rules_whose_runs_it_breaks(store):
    """An exception in the scenario's code is a finding, not a traceback: the rules whose runs raise fail with it."""
    report = run_checks(Crashes, store=store)
    assert "its run failed: ZeroDivisionError" in report.failed["stored"][0]
    assert "batched and checked" in report.failed and {"reproducible", "resumable", "replayable"} <= set(report.not_checked)


def test_check_command_reports_every_broken_rule_and_exits_1():
    """`societas check` on the broken example names its four broken rules (text and --json) and exits 1."""
    proc = cli("check", BROKEN)
    assert proc.returncode == 1, proc.stderr
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in proc.stdout.splitlines()
            if line.startswith("│") and line.split("│")[1].strip()}
    assert {rule for rule, mark in rows.items() if mark == "fails"} == {"stored", "reproducible", "resumable", "replayable"}
    assert {rule for rule, mark in rows.items() if mark == "holds"} == {"declared", "seeded", "batched and checked"}
    data = json.loads(cli("check", BROKEN, "--json").stdout)
    assert data["ok"] is False and set(data["failed"]) == {"stored", "reproducible", "resumable", "replayable"}


def test_check_command_passes_a_good_scenario_file_and_refuses_bad_input():
    """A file reference that keeps the contract exits 0; an unknown scenario or a refused field is one line, exit 2."""
    good = cli("check", str(ROOT / "scenarios" / "examples" / "coins.py") + ":Coins", "--json", "--ticks", "2")
    assert good.returncode == 0, good.stderr
    assert json.loads(good.stdout)["passed"] == list(RULES)
    for args in (["no_such_scenario"], ["scenarios.examples.coins:Coins", "--set", "players=many"],
                 ["scenarios.examples.coins:Nope"]):
        bad = cli("check", *args)
        assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.startswith("error:"), bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1


def test_the_kit_keeps_its_public_address():
    """`from sim.testing import check_scenario`, where README long said to import it, is the kit itself."""
    import sim.testing
    import societas.testing

    assert sim.testing.check_scenario is societas.testing.check_scenario
    assert sim.testing.ConformanceError is ConformanceError
