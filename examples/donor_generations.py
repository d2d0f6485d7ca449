"""The donor game across generations: average final resources per generation, by strategy mix.

Vallinder & Hughes 2024, "Cultural Evolution of Cooperation among LLM Agents": players give a
share of their resources to a recipient who receives twice the gift; after two games the richer
half survives and the others are replaced by newcomers inheriting (with mutation) from survivors.
Cooperation that pays spreads; defectors free-ride and, in a mixed population, can take over.

    python examples/donor_generations.py           # 12 players, 12 rounds, 10 generations, 5 seeds (~1 min)
    python examples/donor_generations.py --small   # 4 generations, 1 seed
    python examples/donor_generations.py --llm     # plus LLM donors, with and without punishment (minutes)
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import pandas as pd

from _common import finish, parse_args, run_cells, summarise


def half(a: str, b: str, n: int) -> list[dict]:
    return [{"count": n // 2, "policy": "scripted", "strategy": a}, {"count": n - n // 2, "policy": "scripted", "strategy": b}]


def mixes(n: int) -> list[tuple[str, dict]]:
    """(label, run fields): the scripted strategy mixes of the first generation."""
    return [("fixed", {"strategy": "fixed"}),
            ("image scoring", {"strategy": "image"}),
            ("fixed + defector", {"population": half("fixed", "defector", n)}),
            ("image + defector", {"population": half("image", "defector", n)}),
            ("punisher + defector", {"population": half("punisher", "defector", n), "punishment": True}),
            ("defector", {"strategy": "defector"})]


def per_generation(runs: pd.DataFrame) -> pd.DataFrame:
    """Long form: one row per run and generation from the `avg_final_resources_gen_G` final metrics."""
    prefix = "avg_final_resources_gen_"
    cols = sorted((c for c in runs.columns if c.startswith(prefix)), key=lambda c: int(c[len(prefix):]))
    if not cols:
        raise SystemExit("no avg_final_resources_gen_G metric: has the donor scenario renamed it?")
    long = runs.melt(id_vars=["mix", "seed", "run_id"], value_vars=cols, var_name="generation", value_name="resources")
    long = long.rename(columns={"resources": "avg_final_resources"})
    long["generation"] = long["generation"].str[len(prefix):].astype(int)
    return long.dropna(subset=["avg_final_resources"])


def main() -> None:
    args = parse_args("donor", __doc__, seeds=5, llm_seeds=1)
    n, rounds, generations = 12, 12, (4 if args.small else 10)
    base = {"scenario": "donor", "policy": "scripted", "agents": n, "rounds": rounds, "generations": generations}
    runs = run_cells([({"mix": label}, {**base, **fields}) for label, fields in mixes(n)], range(args.seeds), args.db)
    if args.llm:  # LLM donors write a strategy each generation and decide every gift: a small society
        llm = {"scenario": "donor", "policy": "llm", **({"agents": 4, "rounds": 2, "generations": 2} if args.small
                                                        else {"agents": 6, "rounds": 4, "generations": 3})}
        cells = [({"mix": "llm"}, llm), ({"mix": "llm + punishment"}, {**llm, "punishment": True})]
        runs = pd.concat([runs, run_cells(cells, range(args.llm_seeds), args.db)], ignore_index=True)
    long = per_generation(runs)
    summary = summarise(long, ["mix", "generation"], ["avg_final_resources"])

    fig, ax = plt.subplots(figsize=(8, 5))
    for mix, part in summary.groupby("mix", sort=False):
        ax.plot(part["generation"], part["avg_final_resources_mean"], marker="o", label=mix)
        ax.fill_between(part["generation"], part["avg_final_resources_lo"], part["avg_final_resources_hi"], alpha=0.15)
    ax.set_xlabel("generation")
    ax.set_ylabel("average final resources")
    ax.set_title(f"Donor game: {n} players, {rounds} rounds a game, mean and 95% bootstrap interval over seeds")
    ax.legend(fontsize=8)
    wide = summary.pivot(index="mix", columns="generation", values="avg_final_resources_mean").reindex(
        list(dict.fromkeys(summary["mix"])))
    table = "average final resources per generation (mean over seeds)\n" + wide.round(1).to_string()
    table += "\n\ndonation rate over the run: " + ", ".join(
        f"{k}: {v:.2f}" for k, v in runs.groupby("mix", sort=False)["donation_rate"].mean().items())
    finish(args, "donor", runs, summary, fig, table)


if __name__ == "__main__":
    main()
