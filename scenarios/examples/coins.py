"""A whole scenario in one file that keeps the platform's contract: `societas check scenarios.examples.coins:Coins`.

A gift game in a ring: each round every player receives `endowment` coins and gives some of them to the player
after it; what is given is multiplied by `multiplier` on the way. Written as a scenario file of your own is (it
imports the public faces `sim.model` and `sim.spaces` only), and kept small on purpose: every line is one the
conformance kit reads. `scenarios.examples.broken` is the same game written in a hurry.
"""

from pydantic import Field

from sim.model import ScenarioConfig, SocietyAgent, SocietyModel
from sim.spaces import Number


# ----- scripted strategies: (request, rng) -> value, reading only request.observation and drawing only from rng
def half(request, rng):
    """Give half the endowment (rounded down)."""
    return float(request.observation["endowment"] // 2)


def nothing(request, rng):
    """Give nothing."""
    return 0.0


def random_gift(request, rng):
    """Give a number of coins drawn from the decision's own generator: different seeds, different runs."""
    return float(rng.randint(0, request.observation["endowment"]))


class CoinsConfig(ScenarioConfig):
    players: int = Field(4, ge=2, le=1000, description="players in the ring")
    rounds: int = Field(5, ge=1, le=1000, description="rounds played (the horizon)")
    endowment: int = Field(5, ge=1, le=100, description="coins each player receives each round")
    multiplier: float = Field(1.5, gt=0, le=10, description="what a gift is multiplied by on its way")
    strategy: str = Field("half", description="scripted players' strategy: half, nothing or random")


class Coins(SocietyModel):
    name = "coins_example"
    description = "gift game in a ring: give some of your coins to the next player; gifts are multiplied"
    Config = CoinsConfig
    horizon_field = "rounds"
    strategies = {"half": half, "nothing": nothing, "random": random_gift}
    default_strategy = "half"
    tick_metric_docs = {"given_rate": "coins given this round / (players x endowment)"}
    final_metric_docs = {"mean_given_rate": "mean over rounds of given_rate"}
    tick_noun = "round"

    def setup(self):
        for policy, strategy, persona in self.population_plan(self.config.players):
            SocietyAgent(self, policy=policy, strategy=strategy, persona=persona, memory=self.new_memory())
        self.given: dict[int, float] = {}
        self.rates: list[float] = []

    def observe(self, agent, phase):
        c = self.config
        return self.request(
            agent, phase, Number(0, c.endowment, 1), 0.0, {"endowment": c.endowment},
            f"You play a gift game with {c.players} players in a ring. Each round you receive {c.endowment} coins "
            f"and give some to the next player; a gift is multiplied by {c.multiplier:g} on its way.",
            "How many coins do you give?",
        )

    def act(self, phase, decisions):
        self.given = {d.agent_id: float(d.value) for d in decisions}

    def payoffs(self):
        ids = sorted(self.given)
        received = {ids[(i + 1) % len(ids)]: self.given[a] * self.config.multiplier for i, a in enumerate(ids)}
        return {a: self.config.endowment - self.given[a] + received.get(a, 0.0) for a in ids}

    def scenario_metrics(self):
        rate = sum(self.given.values()) / (self.config.players * self.config.endowment)
        self.rates.append(rate)
        return {"given_rate": rate}

    def final_metrics(self):
        return {"mean_given_rate": sum(self.rates) / len(self.rates) if self.rates else 0.0}

    def state(self):
        return {"given": sum(self.given.values())}
