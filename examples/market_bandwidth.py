"""The market: welfare against the optimum and first-proposal rate as the search bandwidth grows.

Bansal et al. 2025, "Magentic Marketplace": customers' assistants search for restaurants, ask
them for proposals and pay one. More search results (`bandwidth`) should help a careful shopper
reach the optimal welfare, while an assistant that takes the first proposal to arrive (the
paper's first-proposal bias) gains little and its welfare falls as more, slower offers come in.
Markets are read from the Magentic data (../shared/data/magentic or $SOCIETAS_DATA_DIR).

    python examples/market_bandwidth.py           # mexican_100_300, 7 bandwidths x 3 shoppers, 3 seeds (~1 min)
    python examples/market_bandwidth.py --small   # mexican_10_30, 3 bandwidths, 1 seed
    python examples/market_bandwidth.py --llm     # plus LLM customers (scripted honest businesses; minutes)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from _common import err, finish, parse_args, pm_table, run_cells, summarise

METRICS = ["welfare_ratio", "first_proposal_rate", "payment_rate", "welfare", "optimal_welfare"]  # final metrics of `market`
SHOPPERS = ["optimal", "cheapest", "first"]  # scripted customers


def main() -> None:
    args = parse_args("market", __doc__, seeds=3, llm_seeds=1)
    if args.small:
        market, bandwidths = "mexican_10_30", [1, 3, 10]
    else:
        market, bandwidths = "mexican_100_300", [1, 2, 3, 5, 10, 20, 30]
    base = {"scenario": "market", "market": market, "search": "lexical", "businesses": "honest"}
    cells = [({"customers": c, "bandwidth": b}, {**base, "policy": "scripted", "customers": c, "bandwidth": b})
             for c in SHOPPERS for b in bandwidths]
    runs = run_cells(cells, range(args.seeds), args.db)
    if args.llm:  # LLM customers on a small market; the businesses stay scripted
        llm = {**base, "market": "mexican_10_30", "policy": "llm", "llm_side": "customers"}
        cells = [({"customers": "llm", "bandwidth": b}, {**llm, "bandwidth": b}) for b in bandwidths[:: max(1, len(bandwidths) // 3)]]
        runs = pd.concat([runs, run_cells(cells, range(args.llm_seeds), args.db)], ignore_index=True)
    summary = summarise(runs, ["customers", "bandwidth"], METRICS)

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for who, part in summary.groupby("customers", sort=False):
        for ax, m in ((left, "welfare_ratio"), (right, "first_proposal_rate")):
            ax.errorbar(part["bandwidth"], part[f"{m}_mean"], yerr=err(part, m), marker="o", capsize=3, label=who)
    left.axhline(1.0, color="k", ls="--", lw=0.8)
    left.set(xscale="log", xlabel="search bandwidth (results per customer)", ylabel="welfare / optimal welfare",
             title="welfare against optimal")
    right.set(xscale="log", xlabel="search bandwidth (results per customer)", ylabel="share of payments to the first proposal",
              title="first-proposal rate")
    left.legend(title="customers")
    fig.suptitle(f"Magentic market {market}, lexical search, honest businesses, mean ± 95% CI over seeds")
    fig.tight_layout()
    finish(args, "market", runs, summary, fig, pm_table(summary, ["customers", "bandwidth"], METRICS[:3]))


if __name__ == "__main__":
    main()
