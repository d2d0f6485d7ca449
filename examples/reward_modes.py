"""Reward-mode ablation in the commons: private vs integrated vs cooperative rewards.

Coopetition-Gym's reward modes on the GovSim fishery: `private` r_i = own payoff; `integrated`
r_i = own + λ x the others' mean payoff; `cooperative` r_i = the group's mean payoff. The
payoff (the catch) is the same in every mode; what changes is the reward an agent is told.

Scripted fishers do not read their reward, so with them every figure is the same in every mode,
which is the control: their catches, survival and catch equality, and Perolat's efficiency U and
equality E, which are over the material payoffs (runs before decision contract 6 computed them over
the shaped rewards, so U doubled under integrated λ = 1 with the same catches; docs/metrics.md). The behavioural question, whether being rewarded for the
group changes how much agents fish, is asked with `--llm`: LLM fishers read their reward.

    python examples/reward_modes.py           # 3 sustainable + 2 random fishers, 4 modes, 5 seeds (seconds)
    python examples/reward_modes.py --small   # one seed
    python examples/reward_modes.py --llm     # plus 5 LLM fishers in every mode (minutes)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from _common import bars, finish, parse_args, pm_table, run_cells, summarise

# Final metrics of `commons`: the GovSim figures and Perolat's (both over the catches, the material payoff).
METRICS = ["survival_time", "gain", "equality", "over_usage", "perolat_efficiency", "perolat_equality"]
MODES = [("private", {"reward_mode": "private"}),
         ("integrated λ=0.5", {"reward_mode": "integrated", "lam": 0.5}),
         ("integrated λ=1", {"reward_mode": "integrated", "lam": 1.0}),
         ("cooperative", {"reward_mode": "cooperative"})]
SCRIPTED = [{"count": 3, "policy": "scripted", "strategy": "sustainable"}, {"count": 2, "policy": "scripted", "strategy": "random"}]


def main() -> None:
    args = parse_args("rewards", __doc__, seeds=5, llm_seeds=2)
    base = {"scenario": "commons", "fishers": 5, "months": 12}
    cells = [({"fishers": "3 sustainable + 2 random", "reward": label}, {**base, "policy": "scripted", "population": SCRIPTED, **mode})
             for label, mode in MODES]
    runs = run_cells(cells, range(args.seeds), args.db)
    if args.llm:
        llm = {**base, "policy": "llm", "months": 3 if args.small else 12}
        cells = [({"fishers": "5 llm", "reward": label}, {**llm, **mode}) for label, mode in MODES]
        runs = pd.concat([runs, run_cells(cells, range(args.llm_seeds), args.db)], ignore_index=True)
    summary = summarise(runs, ["fishers", "reward"], METRICS)

    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, m in zip(axes.flat, METRICS):
        bars(ax, summary, "reward", "fishers", m)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("Commons reward modes: GovSim and Perolat figures (over payoffs), mean and 95% interval")
    fig.tight_layout()
    finish(args, "rewards", runs, summary, fig, pm_table(summary, ["fishers", "reward"], METRICS))


if __name__ == "__main__":
    main()
