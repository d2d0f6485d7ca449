"""Every study in examples/ runs at its smallest size with scripted agents, as a user runs it.

Each runs as a subprocess (`python examples/X.py --small --out DIR`) and must write its summary
CSV (the expected columns, one row per setting), its per-run CSV and a valid PNG; a few
assertions check that the figures say what the study is about.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from tests.conftest import ROOT

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def study(script: str, name: str, out: Path, *extra: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run a study at --small into `out`; check `name`.csv/_runs.csv/.png; return the summary and per-run frames."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--small", "--out", str(out), *extra],
                          capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    png = (out / f"{name}.png").read_bytes()
    assert png[:8] == PNG_MAGIC and png[12:16] == b"IHDR"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert width > 200 and height > 200
    from PIL import Image

    with Image.open(out / f"{name}.png") as im:
        im.verify()
    assert f"wrote {out / (name + '.csv')}" in proc.stdout
    return pd.read_csv(out / f"{name}.csv"), pd.read_csv(out / f"{name}_runs.csv")


def has_summary(summary: pd.DataFrame, keys: list[str], metrics: list[str], rows: int) -> None:
    expected = set(keys) | {"n"} | {f"{m}_{s}" for m in metrics for s in ("mean", "lo", "hi")}
    assert expected <= set(summary.columns), expected - set(summary.columns)
    assert len(summary) == rows
    assert not summary.duplicated(subset=keys).any()
    for m in metrics:
        assert summary[f"{m}_mean"].map(math.isfinite).all(), m
        # the interval holds the mean and never leaves the runs' own range (Wilson / bootstrap, not mean +- t sd)
        assert (summary[f"{m}_lo"] <= summary[f"{m}_mean"] + 1e-9).all() and (summary[f"{m}_mean"] <= summary[f"{m}_hi"] + 1e-9).all(), m


def test_govsim_table(tmp_path: Path) -> None:
    metrics = ["survival_time", "survival_rate", "total_gain", "gain", "efficiency", "equality", "over_usage"]
    summary, runs = study("govsim_table.py", "govsim", tmp_path)
    has_summary(summary, ["fishers", "newcomer"], metrics, rows=10)  # 5 scripted strategies, with and without newcomer
    assert len(runs) == 10 and set(runs["newcomer"]) == {"no", "greedy"}
    row = summary.set_index(["fishers", "newcomer"])
    assert row.loc[("sustainable", "no"), "survival_time_mean"] == 12  # the horizon
    assert row.loc[("greedy", "no"), "survival_time_mean"] < 12
    # the greedy newcomer costs the sustainable fishers part of their gain and makes catches unequal
    assert row.loc[("sustainable", "greedy"), "gain_mean"] < row.loc[("sustainable", "no"), "gain_mean"]
    assert row.loc[("sustainable", "greedy"), "equality_mean"] < 1


def test_opinion_clusters(tmp_path: Path) -> None:
    summary, runs = study("opinion_clusters.py", "clusters", tmp_path)
    has_summary(summary, ["members", "epsilon"], ["opinion_clusters", "opinion_variance", "opinion_shift"], rows=3)
    assert "rule_1_over_2eps" in summary.columns and len(runs) == 3
    by_eps = summary.sort_values("epsilon")
    assert (by_eps["opinion_clusters_mean"] >= 1).all()
    assert by_eps["opinion_clusters_mean"].iloc[-1] <= by_eps["opinion_clusters_mean"].iloc[0]  # wider ε, fewer clusters


def test_donor_generations(tmp_path: Path) -> None:
    summary, runs = study("donor_generations.py", "donor", tmp_path)
    has_summary(summary, ["mix", "generation"], ["avg_final_resources"], rows=6 * 4)  # 6 mixes x 4 generations
    assert sorted(summary["generation"].unique()) == [1, 2, 3, 4] and len(runs) == 6
    mean = summary.set_index(["mix", "generation"])["avg_final_resources_mean"]
    assert (mean.loc["defector"] == 10.0).all()  # nobody gives: everyone keeps the endowment
    assert (mean.loc["fixed"] > 10.0).all()


@pytest.mark.skipif(not any(p.is_dir() for p in [ROOT.parent / "shared" / "data" / "magentic",
                                                  Path(os.environ.get("SOCIETAS_DATA_DIR", "/nonexistent"))]),
                    reason="Magentic data not found (../shared/data/magentic or $SOCIETAS_DATA_DIR)")
def test_market_bandwidth(tmp_path: Path) -> None:
    summary, runs = study("market_bandwidth.py", "market", tmp_path)
    has_summary(summary, ["customers", "bandwidth"], ["welfare_ratio", "first_proposal_rate", "payment_rate"], rows=3 * 3)
    s = summary.set_index(["customers", "bandwidth"])
    assert s.loc[("optimal", 10), "welfare_ratio_mean"] >= s.loc[("optimal", 1), "welfare_ratio_mean"]
    assert s.loc[("first", 10), "first_proposal_rate_mean"] > s.loc[("optimal", 10), "first_proposal_rate_mean"]
    assert len(runs) == 9


def test_reward_modes(tmp_path: Path) -> None:
    metrics = ["survival_time", "gain", "equality", "over_usage", "perolat_efficiency", "perolat_equality"]
    summary, runs = study("reward_modes.py", "rewards", tmp_path, "--seeds", "2")
    has_summary(summary, ["fishers", "reward"], metrics, rows=4)
    assert len(runs) == 8
    # scripted fishers do not read rewards: the catches are the control, the same in every mode
    assert summary["gain_mean"].nunique() == 1 and summary["equality_mean"].nunique() == 1
    s = summary.set_index("reward")
    # Perolat's four are over the material payoffs (contract 6), so the same catches give the same figures in every
    # mode (over the shaped rewards, cooperative equality read 1.0 and integrated λ=1 doubled U)
    assert summary["perolat_equality_mean"].nunique() == 1 and summary["perolat_efficiency_mean"].nunique() == 1
    assert s.loc["cooperative", "perolat_equality_mean"] == pytest.approx(s.loc["private", "equality_mean"], abs=0.05)
