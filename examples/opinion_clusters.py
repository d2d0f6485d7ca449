"""Bounded-confidence opinion clusters against the confidence bound ε, beside the 1/(2ε) rule.

Deffuant et al. 2000, "Mixing beliefs among interacting agents": members who only move toward
opinions within ε of their own end in about 1/(2ε) clusters. Here the members of the social
scenario read a random feed (complete follow graph, everyone active, everyone posting) and update
on one item read per tick; the final `opinion_clusters` metric is counted per ε.

    python examples/opinion_clusters.py           # 200 members, 100 ticks, 7 values of ε, 3 seeds (~2 min)
    python examples/opinion_clusters.py --small   # 60 members, 40 ticks, 3 values of ε, 1 seed
    python examples/opinion_clusters.py --llm     # plus LLM members (they do not read ε; minutes)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from _common import err, finish, parse_args, pm_table, run_cells, summarise

METRICS = ["opinion_clusters", "opinion_unclustered_share", "opinion_variance", "opinion_shift"]  # final metrics of `social`
MIXING = {"graph": "complete", "recommender": "random", "activity": 1.0, "post_rate": 1.0, "mu": 0.5,
          "opinion_model": "deffuant", "metric_every": 100000}


def main() -> None:
    args = parse_args("clusters", __doc__, seeds=3)
    if args.small:
        epsilons, agents, ticks = [0.15, 0.25, 0.4], 60, 100  # (at 40 ticks ε=0.15 has not formed clusters yet)
    else:
        epsilons, agents, ticks = [0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5], 200, 100
    cells = [({"members": "scripted", "epsilon": e},
              {"scenario": "social", "policy": "scripted", "agents": agents, "ticks": ticks, "epsilon": e, **MIXING})
             for e in epsilons]
    runs = run_cells(cells, range(args.seeds), args.db)
    if args.llm:  # a small LLM community: members write and read posts; their opinions come from the stance they take
        llm_agents, llm_ticks = (8, 3) if args.small else (20, 10)
        llm_cells = [({"members": "llm", "epsilon": e},
                      {"scenario": "social", "policy": "llm", "agents": llm_agents, "ticks": llm_ticks, "epsilon": e,
                       **{**MIXING, "activity": 0.5}}) for e in epsilons[:: max(1, len(epsilons) // 3)]]
        runs = pd.concat([runs, run_cells(llm_cells, range(args.llm_seeds), args.db)], ignore_index=True)
    summary = summarise(runs, ["members", "epsilon"], METRICS)
    summary["rule_1_over_2eps"] = 1 / (2 * summary["epsilon"])

    fig, ax = plt.subplots(figsize=(7, 4.5))
    grid = np.linspace(min(epsilons), max(epsilons), 200)
    ax.plot(grid, 1 / (2 * grid), "k--", label="1/(2ε)")
    for who, part in summary.groupby("members", sort=False):
        ax.errorbar(part["epsilon"], part["opinion_clusters_mean"], yerr=err(part, "opinion_clusters"),
                    marker="o", capsize=3, label=f"{who} members")
    ax.set_xlabel("confidence bound ε")
    ax.set_ylabel("final major opinion clusters")
    ax.set_title(f"Deffuant bounded confidence: {agents} members, {ticks} ticks, mean and 95% interval")
    ax.legend()
    table = pm_table(summary, ["members", "epsilon"], METRICS) + "\n\n1/(2ε): " + ", ".join(
        f"ε={e:g}: {1 / (2 * e):.1f}" for e in epsilons)
    finish(args, "clusters", runs, summary, fig, table)


if __name__ == "__main__":
    main()
