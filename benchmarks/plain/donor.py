"""The donor game across generations (scenarios/donor) in plain Mesa.

A generation is split at random into two halves and plays two games of `rounds` rounds, every player starting
each game with `endowment` and no reputation (decision contract 8). Each round one half gives to the other (the halves alternate; the second game swaps
which half starts), each donor to a different recipient of the other half, never the same one twice in a game;
the recipient gets `multiplier` x the gift. Donors are scripted: `fixed` gives its inherited `fraction`,
`defector` nothing, `image` its fraction only to a recipient whose last gift share was at least its `threshold`.
After two games the top half by average final resources survive and each of the others is replaced by a
newcomer inheriting a random survivor's strategy and parameters, mutated by a Gaussian of s.d. `mutation`.
Reported each round: the players' mean resources, the donors' mean share given and the units given.

Every draw (halves, schedules, the order donors act in, survivors' ties, parents, mutations) comes from the
model's RNG in the engine's order, so with these strategies it reproduces the engine's run exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Optional

import mesa


class Player(mesa.Agent):
    """A player: its strategy and inherited parameters, resources, games' final resources, last gift share."""

    def __init__(self, model: "PlainDonor", strategy: str, fraction: float, threshold: float) -> None:
        super().__init__(model)
        self.strategy, self.fraction, self.threshold = strategy, fraction, threshold
        self.resources = model.endowment
        self.finals: list[float] = []
        self.last_gift: Optional[float] = None  # the share of its resources it gave last (None: not yet)
        self.recipient: Optional[Player] = None

    @property
    def score(self) -> float:
        return sum(self.finals) / len(self.finals) if self.finals else self.resources

    def donate(self) -> None:
        m, other = self.model, self.recipient
        stingy = other.last_gift is not None and other.last_gift < self.threshold - 1e-9
        if self.strategy == "defector" or (self.strategy == "image" and stingy):
            share = 0.0
        else:
            share = round(100 * self.fraction) / 100.0
        x = share * self.resources
        self.resources -= x
        other.resources += m.multiplier * x
        self.last_gift = share
        m.shares.append(share)
        m.units += x


class PlainDonor(mesa.Model):
    """Generations x 2 games x `rounds` rounds of the donor game."""

    def __init__(self, n: int, *, seed: int, rounds: int = 12, endowment: float = 10.0, multiplier: float = 2.0,
                 strategy: str = "fixed", fraction: float = 0.5, threshold: float = 0.1, mutation: float = 0.05) -> None:
        super().__init__(seed=seed)
        self.rounds, self.endowment, self.multiplier, self.mutation = rounds, endowment, multiplier, mutation
        for _ in range(n):
            Player(self, strategy, fraction, threshold)
        self.generation = 0
        self.halves: tuple[list[Player], list[Player]] = ([], [])
        self.schedule: dict[int, tuple[list[Player], list[int]]] = {}
        self.metrics: dict[str, float] = {}

    def step(self) -> None:
        t, r = self.steps - 1, self.rounds
        generation, game, rnd = t // (2 * r) + 1, (t % (2 * r)) // r + 1, t % r + 1
        if generation != self.generation:
            if self.generation:
                self.turnover()
            self.generation = generation
            players = sorted(self.agents, key=lambda a: a.unique_id)
            self.random.shuffle(players)
            m = len(players) // 2
            self.halves = (players[:m], players[m:])
            for a in players:
                a.finals, a.last_gift = [], None
        if rnd == 1:  # each game starts afresh: resources and reputations (decision contract 8, as Vallinder & Hughes)
            for a in self.agents:
                a.resources, a.last_gift = self.endowment, None
            m = len(self.halves[0])
            for h in (0, 1):
                order = list(self.halves[h])
                self.random.shuffle(order)
                self.schedule[h] = (order, self.random.sample(range(m), m))
        giving = (rnd - 1 + game - 1) % 2
        donors, shifts = self.schedule[giving]
        others, k = self.halves[1 - giving], shifts[(rnd - 1) // 2]
        for i, d in enumerate(donors):
            d.recipient = others[(i + k) % len(others)]
        self.shares: list[float] = []
        self.units = 0.0
        mesa.agent.AgentSet(sorted(donors, key=lambda a: a.unique_id), random=self.random).shuffle_do("donate")
        if rnd == r:
            for a in self.agents:
                a.finals.append(a.resources)
        res = [a.resources for a in self.agents]
        self.metrics = {"mean_resources": sum(res) / len(res), "donation_rate": sum(self.shares) / len(self.shares),
                        "units_given": self.units}

    def turnover(self) -> None:
        """The top half by average final resources survive; each of the others is replaced by a survivor's child."""
        ranked = sorted(self.agents, key=lambda a: a.unique_id)
        self.random.shuffle(ranked)
        ranked.sort(key=lambda a: -a.score)
        keep = len(ranked) // 2
        survivors, dropped = ranked[:keep], ranked[keep:]
        for a in dropped:
            a.remove()
        for _ in dropped:
            parent = self.random.choice(survivors)
            fraction, threshold = parent.fraction, parent.threshold
            if self.mutation:
                fraction = min(1.0, max(0.0, fraction + self.random.gauss(0.0, self.mutation)))
                threshold = min(1.0, max(0.0, threshold + self.random.gauss(0.0, self.mutation)))
            Player(self, parent.strategy, fraction, threshold)


#: the engine's scenario this model stands beside
SCENARIO = "donor"


def timing(n: int = 1000) -> tuple[list[str], Callable[[int], PlainDonor], int]:
    """The timed pair: n players, 12 rounds, two generations (48 rounds; the turnover between them)."""
    sets = [f"agents={n}", "rounds=12", "generations=2"]
    return sets, lambda seed: PlainDonor(n, seed=seed), 48


def check() -> tuple[list[str], Callable[[int], PlainDonor], int, dict[str, str]]:
    """The pair that must agree: image scorers with inherited, mutated parameters over three generations."""
    sets = ["agents=24", "rounds=6", "generations=3", "strategy=image", "fraction=0.3", "threshold=0.25", "mutation=0.2"]
    plain = lambda seed: PlainDonor(24, seed=seed, rounds=6, strategy="image", fraction=0.3, threshold=0.25,  # noqa: E731
                                    mutation=0.2)
    return sets, plain, 36, {k: k for k in ("mean_resources", "donation_rate", "units_given")}
