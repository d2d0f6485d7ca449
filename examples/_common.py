"""Plumbing shared by the study scripts: flags, output folder, the seeds loop, a progress bar, mean ± CI.

Only the public API (`import sim`) runs anything; this module just saves each script a few lines.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only, no display needed

import pandas as pd  # noqa: E402

HERE = Path(__file__).resolve().parent
if (HERE.parent / "societas" / "api.py").is_file():  # run from a checkout: use its code, installed or not
    sys.path.insert(0, str(HERE.parent))

import sim  # noqa: E402
from sim.reward.intervals import is_rate, mean_interval  # noqa: E402


def parse_args(study: str, doc: str, *, seeds: int, llm_seeds: int = 1) -> argparse.Namespace:
    """The flags every study takes; `args.db` is a SQLite store inside the output folder."""
    p = argparse.ArgumentParser(description=doc.strip().splitlines()[0], epilog=f"Output: CSV + PNG in --out (default examples/out/{study}/)")
    p.add_argument("--small", "--quick", action="store_true", help="a reduced size: one seed, fewer settings (seconds)")
    p.add_argument("--llm", action="store_true", help="also run LLM agents on the embedded model (policy llm; minutes on a CPU)")
    p.add_argument("--seeds", type=int, default=None, help=f"seeds per setting for scripted agents (default {seeds}, --small 1)")
    p.add_argument("--llm-seeds", type=int, default=None, help=f"seeds per setting for LLM agents (default {llm_seeds}, --small 1)")
    p.add_argument("--out", type=Path, default=HERE / "out" / study, help="output folder")
    p.add_argument("--db", default=None, help="store URL (default: runs.db in the output folder; browse it with the app)")
    args = p.parse_args()
    for name, default in (("seeds", seeds), ("llm_seeds", llm_seeds)):
        n = getattr(args, name)
        n = (1 if args.small else default) if n is None else n
        if n < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
        setattr(args, name, n)
    args.out.mkdir(parents=True, exist_ok=True)
    args.db = args.db or f"sqlite:///{(args.out / 'runs.db').resolve()}"
    args.started = time.time()
    return args


class Progress:
    """A one-line progress bar on stderr (`[#####.....] 5/10 12s label`); a line per 10% when not a terminal."""

    def __init__(self, total: int, width: int = 24) -> None:
        self.total, self.width, self.done = max(total, 1), width, 0
        self.t0, self.tty, self.said = time.time(), sys.stderr.isatty(), -1

    def show(self, label: str = "") -> None:
        elapsed = time.time() - self.t0
        if self.tty:
            filled = round(self.width * self.done / self.total)
            bar = "#" * filled + "." * (self.width - filled)
            sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} {elapsed:5.0f}s {label[:50]:<50}")
        elif (tenth := 10 * self.done // self.total) > self.said:
            self.said = tenth
            sys.stderr.write(f"{self.done}/{self.total} runs, {elapsed:.0f}s\n")
        sys.stderr.flush()

    def step(self, label: str = "") -> None:
        self.done += 1
        self.show(label)

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")
            sys.stderr.flush()


Cell = tuple[dict[str, Any], dict[str, Any]]  # (labels for the CSV, arguments for sim.run)


def run_cells(cells: Sequence[Cell], seeds: Iterable[int], db: str,
              extract: Callable[[sim.Result], dict[str, Any]] | None = None) -> pd.DataFrame:
    """Run every cell once per seed with `sim.run`; one row per run: labels, seed, run_id, final metrics.

    `extract(result)` may add columns (e.g. from `result.per_tick`). A metric a study asks for
    that the scenario does not have fails loudly later (`frame[name]`), never silently.
    """
    seeds = list(seeds)
    bar = Progress(len(cells) * len(seeds))
    rows = []
    for labels, kwargs in cells:
        for seed in seeds:
            tag = " ".join(f"{v}" for v in labels.values()) + f" seed {seed}"
            bar.show(tag)

            def tick(t: int, total: int, _record: Any, tag: str = tag) -> None:
                bar.show(f"{tag} tick {t}/{total}")

            try:
                result = sim.run(db=db, seed=seed, progress=tick, **kwargs)  # a failed run raises
            except sim.UsageError as exc:  # bad input (e.g. the Magentic data is not there): one line, exit 2
                bar.close()
                sys.exit(f"error: {exc}")
            rows.append({**labels, "seed": seed, "run_id": result.run_id, "fallbacks": result.fallbacks,
                         **result.metrics, **(extract(result) if extract else {})})
            bar.step(tag)
    bar.close()
    return pd.DataFrame(rows)


def summarise(frame: pd.DataFrame, by: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Mean and 95% interval of each metric per group: columns `m_mean`, `m_lo`, `m_hi`, plus `n` (runs).

    The interval is `sim.reward.intervals.mean_interval`'s (Wilson for 0/1 values, else a percentile bootstrap),
    so it never leaves the metric's range; a single run has none (lo = hi = mean here, drawn without a bar).
    """
    rows = []
    for key, part in frame.groupby(list(by), sort=False, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, Any] = {**dict(zip(by, key)), "n": len(part)}
        for m in metrics:
            ci = mean_interval(pd.to_numeric(part[m], errors="coerce").tolist(), rate=is_rate(m))
            mean = ci["mean"] if ci["mean"] is not None else float("nan")
            row.update({f"{m}_mean": mean, f"{m}_lo": ci["lo"] if ci["lo"] is not None else mean,
                        f"{m}_hi": ci["hi"] if ci["hi"] is not None else mean})
        rows.append(row)
    return pd.DataFrame(rows)


def err(summary: pd.DataFrame, metric: str) -> list[list[float]]:
    """Asymmetric error bars (below, above the mean) of `metric` for matplotlib's `yerr`."""
    mean = summary[f"{metric}_mean"]
    return [(mean - summary[f"{metric}_lo"]).tolist(), (summary[f"{metric}_hi"] - mean).tolist()]


def pm_table(summary: pd.DataFrame, by: Sequence[str], metrics: Sequence[str], digits: int = 2) -> str:
    """The summary as text, one `mean [lo, hi]` cell per metric."""
    view = summary[list(by) + ["n"]].copy()
    for m in metrics:
        view[m] = [f"{a:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]" if pd.notna(a) else "n/a"
                   for a, lo, hi in zip(summary[f"{m}_mean"], summary[f"{m}_lo"], summary[f"{m}_hi"])]
    return view.to_string(index=False)


def finish(args: argparse.Namespace, name: str, runs: pd.DataFrame, summary: pd.DataFrame, fig: Any, table: str) -> None:
    """Write `<name>.csv` (the summary), `<name>_runs.csv` (one row per run) and `<name>.png`; print the table."""
    csv, png = args.out / f"{name}.csv", args.out / f"{name}.png"
    summary.to_csv(csv, index=False)
    runs.to_csv(args.out / f"{name}_runs.csv", index=False)
    fig.savefig(png, dpi=120, bbox_inches="tight")
    print(table)
    print(f"\nwrote {csv}, {name}_runs.csv and {png.name} in {time.time() - args.started:.0f} s (runs stored in {args.db})")


def bars(ax: Any, summary: pd.DataFrame, x: str, hue: str | None, metric: str, title: str | None = None) -> None:
    """Grouped bars of `metric_mean` with its interval as error bars: one group per `x`, one colour per `hue`."""
    xs = list(dict.fromkeys(summary[x]))
    hues = list(dict.fromkeys(summary[hue])) if hue else [None]
    width = 0.8 / len(hues)
    for k, h in enumerate(hues):
        part = summary if h is None else summary[summary[hue] == h]
        pos = [xs.index(v) + (k - (len(hues) - 1) / 2) * width for v in part[x]]
        ax.bar(pos, part[f"{metric}_mean"], width, yerr=err(part, metric), capsize=3, label=None if h is None else str(h))
    ax.set_xticks(range(len(xs)), [str(v) for v in xs], rotation=30, ha="right")
    ax.set_title(title or metric)
