"""Screenshots of every page of the app, in a real headless Chromium.

    python tests/screenshots.py --store light --out shots/light      # builds a small store: a run of each scenario
    python tests/screenshots.py --store rich --out shots/rich        # ~50 runs: scenarios, the 2x2 norms sweep,
                                                                      # forks, LLM runs, a 3,000-member community
    python tests/screenshots.py --db sqlite:///runs.db --out shots   # an existing store (its newest runs)

Each page is shot whole (PNG) for the run it suits best (the network for a social run, norms for a fishery with
sanctions); `index.md` beside the pictures says what each shows. Needs chromium and chromium-driver.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import browser  # noqa: E402

RICH_COMMONS = ("fishers=6", "talk=true", "sanctions=true", "social_learning=true",
                "population=[{count: 2, strategy: greedy}, {count: 4, strategy: sustainable}]")


def _cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "societas.cli", *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def build_store(kind: str, url: str) -> None:
    """A light store (one run of each scenario, a fishery with talk and sanctions, a synthesis run) or a rich one
    (that, plus seeds and reward modes, the 2x2 norms sweep, forks, runs of the embedded LLM, 3,000 members)."""
    from runner.config import build_spec
    from runner.execution import RunFailed, execute
    from sim.store.store import Store

    store = Store(url)

    def run(scenario: str, seed: int = 0, sets: tuple[str, ...] = (), policy: str = "scripted", ticks: int | None = None) -> str:
        try:
            return execute(build_spec(scenario, ticks=ticks, seed=seed, sets=sets, policy=policy), store).run_id
        except RunFailed as exc:
            return exc.run_id

    run("donor", sets=("agents=8", "generations=3", "rounds=3"))
    run("market", ticks=3)
    run("social", sets=("agents=200", "ticks=5"))
    run("cleanup", sets=("map=small", "agents=3", "episode_steps=20"), ticks=20)
    run("commons", seed=1, sets=RICH_COMMONS, ticks=8)
    if kind == "light":
        return
    for seed in range(3):
        for mode in ("private", "cooperative"):
            run("commons", seed=seed, sets=(f"reward_mode={mode}", "fishers=5"), ticks=12)
            run("donor", seed=seed, sets=(f"reward_mode={mode}", "agents=6", "generations=2", "rounds=2"))
    sweep = Path(tempfile.mkdtemp()) / "norms.sweep.yaml"
    sweep.write_text((ROOT / "scenarios/commons/configs/norms_2x2.sweep.yaml").read_text().replace("seeds: 5", "seeds: 3"))
    _cli("sweep", str(sweep), "--db", url, "--workers", "2")
    parent = run("commons", seed=7, sets=RICH_COMMONS, ticks=10)
    for mode in ("cooperative", "integrated"):
        _cli("fork", parent, "--at", "4", "--set", f"reward_mode={mode}", "--db", url)
    for seed in range(2):  # the embedded LLM: small on purpose (a CPU)
        run("commons", seed=seed, sets=("fishers=2",), policy="llm", ticks=2)
    run("social", seed=1, sets=("agents=3000", "ticks=3"))


#: page -> (heading it shows, what the picture is for, the kind of run it suits, URL extras)
PAGES: list[tuple[str, str, str, str, str]] = [
    ("runs", "Runs", "every stored run, the config fields that differ as columns, search", "", ""),
    ("run", "Run", "a fishery run: metrics over time with units and the collapse/sustainable lines", "commons", ""),
    ("run", "Run", "the run's state trajectories", "commons", "tab=Trajectories"),
    ("agents", "Agents", "every agent (role, strategy, totals, over-usage, sanctions) and the per-agent chart", "commons", ""),
    ("agents", "Agents", "one agent: payoff, decisions, LLM prompts and answers, memory", "commons", "tab=One+agent"),
    ("network", "Network", "the follow graph at the cursor tick: seeded graph + follows, edges with arrows", "social", ""),
    ("network", "Network", "a market's interaction graph: customers and businesses apart", "market", ""),
    ("norms", "Norms", "norm events per tick in fixed colours, the limit in force against the catch", "commons", ""),
    ("conversations", "Conversations", "what agents said, threaded", "social", ""),
    ("events", "Event", "every event and decision, filterable, with the replay cursor", "commons", ""),
    ("policies", "Policies", "programs written under policy synthesis (or the note that there are none)", "cleanup", ""),
    ("compare", "Compare", "the fishery's runs grouped by policy, backend, lineage and config: means and 95% intervals",
     "commons*", ""),
    ("compare", "Compare", "survival (Kaplan-Meier) per group over the whole horizon", "commons*", "tab=Survival"),
    ("compare", "Compare", "a metric over time per group: mean and band, units, reference lines", "commons*", "tab=Over+time"),
    ("launch", "Launch", "the launch form (a config, a YAML file, a sweep or a fork)", "", ""),
]


def _pick(runs: Any, scenario: str) -> str | None:
    if not scenario:
        return None
    part = runs[runs["scenario"] == scenario]
    return None if part.empty else str(part.sort_values("ticks", ascending=False).iloc[0]["run_id"])


def shoot(url: str, out: Path) -> list[tuple[str, str]]:
    """Every page's picture into `out`; returns (file, what it shows)."""
    from sim.store import queries

    runs = queries.list_runs(queries.open_reader(url))
    made = []
    with browser.served_app(url, out / "streamlit.log", flags=("--allow-write",)) as base, browser.chrome() as driver:
        for i, (slug, heading, what, scenario, extra) in enumerate(PAGES):
            if scenario.endswith("*"):  # every ended run of the scenario (Compare)
                part = runs[(runs["scenario"] == scenario[:-1]) & (runs["status"] != "running")]
                run_id, chosen = None, f"runs={','.join(part['run_id'])}" if len(part) else ""
            else:
                run_id, chosen = _pick(runs, scenario), ""
            query = "&".join(p for p in ((f"run={run_id}" if run_id else ""), chosen, extra) if p)
            charts = slug not in ("runs", "launch", "policies", "conversations", "events")
            if scenario and not scenario.endswith("*") and run_id is None:  # this store has no run of that kind
                charts = False
                what += f" (this store has no {scenario} run: the page shows its newest run)"
            try:
                browser.open_page(driver, f"{base}/{slug}" + (f"?{query}" if query else ""), heading, charts=charts,
                                  charts_required=False)  # (a run may have nothing to chart on a page: it says so)
            except Exception as exc:  # noqa: BLE001 - a page that does not draw is shot as it is, and said so
                what += f" (did not finish drawing: {type(exc).__name__})"
            name = f"{i:02d}-{slug}{'-' + extra.split('=')[1].replace('+', '-').lower() if extra else ''}.png"
            browser.full_screenshot(driver, out / name)
            made.append((name, what + (f" — run {run_id}" if run_id else "")))
    (out / "index.md").write_text("# Screenshots\n\n" + "\n".join(f"- `{n}`: {w}" for n, w in made) + "\n")
    return made


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", help="an existing store (else one is built: --store)")
    ap.add_argument("--store", choices=("light", "rich"), default="light")
    ap.add_argument("--out", default="shots")
    args = ap.parse_args()
    if not browser.available():
        sys.exit("error: chromium and chromium-driver are needed (apt-get install chromium chromium-driver)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    url = args.db
    if url is None:
        url = f"sqlite:///{out / 'runs.db'}"
        if not (out / "runs.db").exists():
            build_store(args.store, url)
    for name, what in shoot(url, out):
        print(f"{out / name}: {what}")


if __name__ == "__main__":
    main()
