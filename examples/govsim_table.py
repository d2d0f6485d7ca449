"""The GovSim fishery table: survival, gain, efficiency, equality and over-usage by kind of fisher.

Piatti et al. 2024, "Cooperate or Collapse" (GovSim): five fishers share a lake that doubles its
remaining stock each month and collapses below 5 tons. Each population plays it alone, then
again with one of its fishers replaced by a greedy newcomer (GovSim's "outsider" experiment).

    python examples/govsim_table.py            # scripted fishers, 5 seeds each (seconds)
    python examples/govsim_table.py --llm      # plus LLM fishers on the embedded model (minutes)
    python examples/govsim_table.py --small    # one seed
"""

from __future__ import annotations

import matplotlib.pyplot as plt

from _common import bars, finish, parse_args, pm_table, run_cells, summarise

# Final metrics of the commons scenario (`societas scenarios --json`), as in GovSim's table.
METRICS = ["survival_time", "survival_rate", "total_gain", "gain", "efficiency", "equality", "over_usage"]
FISHERS, MONTHS = 5, 12
NEWCOMER = {"count": 1, "policy": "scripted", "strategy": "greedy", "persona": "a newcomer who fishes as much as possible"}


def populations(args):
    """(label, policy, run fields) for every kind of fisher; `fixed` fishes 12 t a month, just over the sustainable 10."""
    kinds = [("sustainable", "scripted", {"strategy": "sustainable"}),
             ("fixed (12 t)", "scripted", {"strategy": "fixed", "catch": 12}),
             ("greedy", "scripted", {"strategy": "greedy"}),
             ("random", "scripted", {"strategy": "random"}),
             ("conditional", "scripted", {"strategy": "conditional"})]
    if args.llm:
        kinds.append(("llm", "llm", {}))
    return kinds


def main() -> None:
    args = parse_args("govsim", __doc__, seeds=5, llm_seeds=2)
    months_llm = 3 if args.small else MONTHS  # LLM fishers: a quarter at the reduced size
    cells = []
    for label, policy, fields in populations(args):
        months = months_llm if policy == "llm" else MONTHS
        base = {"scenario": "commons", "policy": policy, "fishers": FISHERS, "months": months}
        cells.append(({"fishers": label, "newcomer": "no"}, {**base, **fields}))
        group = {"count": FISHERS - 1, "policy": policy, **({"strategy": fields["strategy"]} if "strategy" in fields else {})}
        rest = {k: v for k, v in fields.items() if k != "strategy"}
        cells.append(({"fishers": label, "newcomer": "greedy"}, {**base, **rest, "population": [group, NEWCOMER]}))
    scripted = [c for c in cells if c[1]["policy"] == "scripted"]
    llm = [c for c in cells if c[1]["policy"] == "llm"]
    runs = run_cells(scripted, range(args.seeds), args.db)
    if llm:
        import pandas as pd

        runs = pd.concat([runs, run_cells(llm, range(args.llm_seeds), args.db)], ignore_index=True)
    runs["survival_rate"] = 1 - runs["collapsed"]
    summary = summarise(runs, ["fishers", "newcomer"], METRICS)

    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    for ax, m in zip(axes.flat, ["survival_time", "gain", "efficiency", "equality", "over_usage", "survival_rate"]):
        bars(ax, summary, "fishers", "newcomer", m)
    axes.flat[0].legend(title="greedy newcomer")
    fig.suptitle(f"GovSim fishery: {FISHERS} fishers, {MONTHS} months, mean ± 95% CI over seeds")
    fig.tight_layout()
    finish(args, "govsim", runs, summary, fig, pm_table(summary, ["fishers", "newcomer"], METRICS))


if __name__ == "__main__":
    main()
