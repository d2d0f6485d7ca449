"""The gift game of `scenarios.examples.coins` written in a hurry: `societas check
scenarios.examples.broken:BrokenCoins` reports the four rules it breaks, each with what broke it.

- **stored**: it reports a per-tick metric (`luck`) that its `tick_metric_docs` do not describe;
- **reproducible**, **resumable**, **replayable**: a gift is blessed by the process's global `random` module, not
  by the model's seeded generator (`self.random`), so the same seed gives another run, a resumed run differs from
  the uninterrupted one, and a replay from the cache does not match what was stored.

The mend of each is one line: document `luck`, draw from `self.random`.
"""

import random

from scenarios.examples.coins import Coins


class BrokenCoins(Coins):
    name = "broken_coins_example"
    description = "the gift game with two mistakes: an undocumented metric and the global random generator"

    def payoffs(self):
        paid = super().payoffs()
        self.luck = random.random()  # the mistake: global randomness (`self.random.random()` keeps the contract)
        return {a: p + self.luck for a, p in paid.items()}

    def scenario_metrics(self):
        return {**super().scenario_metrics(), "luck": self.luck}  # the mistake: `luck` is in no tick_metric_docs
