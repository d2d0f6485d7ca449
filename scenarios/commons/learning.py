"""Social learning in the fishery: a fisher copies a more successful peer's strategy and its stated belief.

Each month, after the rewards, every fisher taking part looks at one uniform random peer; if the peer earned
more, it imitates it with probability (gap / the month's spread of payoffs): a scripted fisher takes the
peer's strategy, and any fisher takes the limit the peer last proposed as its own belief.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scenarios.commons.model import CommonsModel


def imitate(model: "CommonsModel") -> None:
    """One round of imitation among the fishers taking part this month (seeded by the model's RNG)."""
    fishers = sorted((f for f in model.agents if f.enter <= model.tick), key=lambda f: f.unique_id)
    pays = {f.unique_id: f.last_payoff for f in fishers}
    spread = max(pays.values()) - min(pays.values())
    if spread <= 0 or len(fishers) < 2:
        return
    n = len(fishers)
    for i, f in enumerate(fishers):
        j = model.random.randrange(n - 1)
        peer = fishers[j + (j >= i)]  # a uniform peer other than f, in O(1)
        gap = pays[peer.unique_id] - pays[f.unique_id]
        if gap > 0 and model.random.random() < gap / spread:
            if f.policy == "scripted":
                f.strategy = peer.strategy
            believed = ""
            if peer.belief is not None:
                f.belief, f.copied = peer.belief, True
                believed = f" They proposed a limit of {peer.belief:g} tons; I now think so too."
            f.remember(model.tick, "note", f"Fisher {peer.unique_id} earned {gap:g} more than me by catching "
                                            f"{peer.catch:g}; I will do as they do.{believed}")
            f.relate(peer.unique_id, 0.1)
            model.emit("learn.imitate", f.unique_id, peer.unique_id, strategy=peer.strategy, gap=gap, belief=peer.belief)
