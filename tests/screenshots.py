"""Screenshots of every page of the app, in a real headless Chromium.

    python tests/screenshots.py --store light --out shots/light      # builds a small store: a run of each scenario
    python tests/screenshots.py --store rich --out shots/rich        # ~55 runs: scenarios, the 2x2 norms sweep,
                                                                      # forks, LLM runs (one that talks), grid games
                                                                      # with beams and waste, a 3,000-member community
    python tests/screenshots.py --db sqlite:///runs.db --out shots   # an existing store (its newest runs)

Each page is shot whole (PNG) for the run it suits best (`PICKS`: the network of a social run, the norms of a
fishery with sanctions, a month of a fishery whose LLM fishers talk, the board of a Cleanup game...); `index.md`
beside the pictures says what each shows, the anchor viewers' features among them (GovSim's month opened from a
chart and per-run lines, AgentSociety's replay timeline and grid, Concordia's memory timeline and side-by-side
transcripts, Sotopia's per-agent reward vectors). Needs chromium and chromium-driver.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests import browser  # noqa: E402

RICH_COMMONS = ("fishers=6", "talk=true", "sanctions=true", "social_learning=true",
                "population=[{count: 2, strategy: greedy}, {count: 4, strategy: sustainable}]")
#: a Cleanup game whose agents clean the river and fire beams, and a Gathering game with tagging
CLEANUP = ("map=default", "agents=6", "episode_steps=60", "population=[{count: 3, strategy: cooperative}, "
           "{count: 3, strategy: exploitative}]")
GATHERING = ("map=default", "agents=6", "episode_steps=60", "population=[{count: 3, strategy: exploitative}, "
             "{count: 3, strategy: greedy}]")
#: fishers who take at random, on lakes that regrow more or less: runs collapse at different months (survival)
SURVIVAL_SWEEP = """scenario: commons
policy: scripted
seeds: 6
base: {fishers: 5, months: 12, population: [{count: 5, strategy: random}]}
grid: {regrowth: [1.3, 1.4, 1.6]}
"""


def _cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "societas.cli", *args], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)


def build_store(kind: str, url: str) -> None:
    """A light store (one run of each scenario, a fishery with talk and sanctions, a Cleanup game, a synthesis run) or a rich one
    (that, plus seeds and reward modes, the 2x2 norms sweep, a parent run and its forks, runs of the embedded LLM,
    one of them talking, a Gathering game, 3,000 members)."""
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
    run("cleanup", sets=CLEANUP, ticks=60)
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
    survival = sweep.with_name("survival.sweep.yaml")
    survival.write_text(SURVIVAL_SWEEP)
    _cli("sweep", str(survival), "--db", url, "--workers", "2")
    parent = run("commons", seed=7, sets=RICH_COMMONS, ticks=10)
    _cli("fork", parent, "--at", "1", "--set", "sanctions=false", "--db", url)  # (the greedy fishers are still there)
    _cli("fork", parent, "--at", "4", "--set", "reward_mode=cooperative", "--db", url)
    run("gathering", sets=GATHERING, ticks=60)
    code = sweep.with_name("greedy.py")  # a synthesis run whose program is given (no LLM): its episodes' scores
    code.write_text("def policy(obs):\n    return greedy_action(obs)\n")
    run("gathering", sets=("map=small", "agents=3", "episode_steps=10", "iterations=4", f"seed_code={code}"),
        policy="synthesis", ticks=40)
    for seed in range(2):  # the embedded LLM: small on purpose (a CPU)
        run("commons", seed=seed, sets=("fishers=2",), policy="llm", ticks=2)
    run("commons", seed=3, sets=("fishers=3", "talk=true"), policy="llm", ticks=3)  # fishers who talk: a month to open
    run("social", seed=1, sets=("agents=3000", "ticks=3"))


# ----- which run each picture shows ------------------------------------------------------------------------------------
def _newest(runs: Any, keep: Any) -> Optional[str]:
    part = runs[keep] if len(runs) else runs
    return None if part.empty else str(part.sort_values(["ticks", "created_at"], ascending=False).iloc[0]["run_id"])


def _config(runs: Any, key: str, value: Any) -> Any:
    return runs["config"].map(lambda c: (c or {}).get(key) == value)


def _scenario(name: str) -> Callable[[Any], Optional[str]]:
    return lambda runs: _newest(runs, runs["scenario"] == name)


def _talking_llm(runs: Any) -> Optional[str]:
    return (_newest(runs, (runs["scenario"] == "commons") & (runs["policy"] == "llm") & _config(runs, "talk", True))
            or _newest(runs, (runs["scenario"] == "commons") & (runs["policy"] == "llm")) or _scenario("commons")(runs))


def _sanctions(runs: Any) -> Optional[str]:
    return (_newest(runs, (runs["scenario"] == "commons") & _config(runs, "sanctions", True) & _config(runs, "talk", True)
                    & runs["parent_id"].isna()) or _scenario("commons")(runs))


def _fork(runs: Any) -> Optional[str]:
    differs = runs["parent_id"].notna() & _config(runs, "sanctions", False)
    return _newest(runs, differs) or _newest(runs, runs["parent_id"].notna())


#: a pick's name -> the run it shows (None: the store has none; the page shows its newest run and says so)
PICKS: dict[str, Callable[[Any], Optional[str]]] = {
    "commons": _sanctions, "llm": _talking_llm, "fork": _fork, "social": _scenario("social"),
    "market": _scenario("market"), "cleanup": _scenario("cleanup"), "gathering": _scenario("gathering"),
    "donor": _scenario("donor"),
    "synthesis": lambda runs: _newest(runs, runs["policy"] == "synthesis") or _scenario("cleanup")(runs),
}


def _compare_all(runs: Any) -> str:
    part = runs[(runs["scenario"] == "commons") & (runs["status"] != "running")]
    return f"runs={','.join(part['run_id'])}" if len(part) else ""


def _compare_two(runs: Any) -> str:
    """Two groups: the survival sweep's fast- and slow-regrowing lakes (else the private and cooperative fisheries)."""
    swept = runs[runs["config"].map(lambda c: (c or {}).get("regrowth") in (1.3, 1.6))]
    if len(swept):
        return f"runs={','.join(swept['run_id'])}&by=regrowth&metrics=gain,survival_time,efficiency"
    part = runs[(runs["scenario"] == "commons") & _config(runs, "fishers", 5) & runs["sweep_id"].isna()
                & runs["parent_id"].isna() & (runs["policy"] == "scripted")]
    return f"runs={','.join(part['run_id'])}&by=reward_mode" if len(part) else ""


def _compare_sweep(runs: Any) -> str:
    """The survival sweep (random fishers on lakes of three regrowth rates), else any sweep."""
    swept = runs[runs["sweep_id"].notna()]
    if swept.empty:
        return _compare_all(runs)
    regrowth = swept[swept["config"].map(lambda c: "regrowth" in (c or {}))]
    return f"sweep={(regrowth if len(regrowth) else swept)['sweep_id'].iloc[0]}"


def _compare_fork(runs: Any) -> str:
    fork = _fork(runs)
    if fork is None:
        return ""
    parent = runs.set_index("run_id").at[fork, "parent_id"]
    return f"runs={parent},{fork}"


#: a Compare picture's name -> the runs it compares (URL query)
CHOICES: dict[str, Callable[[Any], str]] = {"all": _compare_all, "two": _compare_two, "sweep": _compare_sweep,
                                            "fork": _compare_fork}

#: page, heading it shows, what the picture shows, the run it suits (a PICKS name) or the runs it compares
#: ("compare:" + a CHOICES name), URL extras
PAGES: list[tuple[str, str, str, str, str]] = [
    ("runs", "Runs", "every stored run, the config fields that differ as columns, search", "", ""),
    ("run", "Run", "a fishery with talk and sanctions: its own metrics over months first (stock, stock at the "
     "month's start, catch total and mean) with units and the collapse/sustainable lines; every point can be clicked "
     "to open its month", "commons", ""),
    ("run", "Run", "the Metrics tab's other section: Perolat's four social metrics over months", "commons",
     "charts=social"),
    ("run", "Run", "GovSim's viewer: a month of a fishery whose LLM fishers talk, opened from a chart (here by its URL, "
     "`?open=2`): what was said, each decision, the harvest prompts and answers", "llm", "open=2&tab=Metrics"),
    ("run", "Run", "the run's state trajectories (resource, norm, strategies), each with its unit; a strategy the fishers "
     "gave up drawn down to 0, not cut off", "commons", "tab=Trajectories"),
    ("run", "Run", "a fork: where it comes from (which run, which tick), links to its parent and to both side by side",
     "fork", "tab=Agents"),
    ("agents", "Agents", "every agent (role, strategy, totals, over-usage, sanctions) under short headers, the id pinned "
     "when the table scrolls sideways, action and payoff per month in agent order with units, and Sotopia's per-agent "
     "scores: each reward component summed per agent", "commons", ""),
    ("agents", "Agents", "Concordia's per-agent log of an LLM fisher: payoff, its reward vector over time (one small "
     "chart per component), decisions, the exact prompts and answers, and its memory timeline", "llm",
     "tab=One+agent&agent=1"),
    ("agents", "Agents", "a donor game of three generations: every agent in id order (2 before 10), all 16 rows shown, "
     "units of its donations", "donor", ""),
    ("network", "Network", "the follow graph at the cursor tick: seeded graph + follows, edges with arrows, the "
     "network metrics of the whole graph beside it", "social", ""),
    ("network", "Network", "the same graph's degree distribution on a linear axis, in the graph's place", "social",
     "view=degree"),
    ("network", "Network", "a market's interaction graph: customers and businesses apart", "market", ""),
    ("norms", "Norms", "norm events per month in fixed colours, the limit in force against the catch", "commons", ""),
    ("conversations", "Conversations", "what agents said, threaded", "social", ""),
    ("events", "Event", "every event and decision, filterable, with the replay cursor", "commons", ""),
    ("replay", "Replay", "AgentSociety's replay: the timeline of what happened each month (click to move the cursor, "
     "step or play) and the cursor's month opened (what was said, each decision; the prompts one toggle away)", "llm",
     "tick=2"),
    ("replay", "Replay", "a Cleanup game's board at a step with beams (agents facing their way, apples, the river and "
     "its waste, cleaning and tagging beams) with a step slider drawn in the browser, and the steps animated", "cleanup",
     "tick=beams"),
    ("replay", "Replay", "a Gathering game's board: agents, apples and tagging beams, animated; its legend lists only "
     "what Gathering has (no river, waste or cleaning beam)", "gathering", "tick=beams"),
    ("policies", "Policies", "a synthesis run's programs, each episode's reward and Perolat's four over iterations, with "
     "titles and named axes", "synthesis", ""),
    ("compare", "Compare", "every fishery run grouped by policy, backend, lineage and config (15 groups): each run, "
     "the group's mean and its 95% interval, with units, one chosen metric drawn, the table of every one under it",
     "compare:all", ""),
    ("compare", "Compare", "two groups (random fishers on lakes regrowing x1.3 and x1.6) across seeds: a row each, never "
     "collapsed into one; each run a dot, the mean a diamond, its 95% interval a bar; gain in tons", "compare:two", ""),
    ("compare", "Compare", "the same two groups' survival in months (the Chart control's second metric)", "compare:two",
     "chart=survival_time"),
    ("compare", "Compare", "survival of random fishers on lakes of three regrowth rates: Kaplan-Meier with its Greenwood "
     "band, the log-rank test between the groups (and each pair, Holm-adjusted), the share collapsed by each month with "
     "Wilson intervals", "compare:sweep", "tab=Survival"),
    ("compare", "Compare", "GovSim's figure: the stock over months per group, each run's line beside the group's mean, a "
     "collapsed run counted as 0 after its collapse (dotted), so the mean does not rise as runs drop out",
     "compare:sweep", "tab=Over+time"),
    ("compare", "Compare", "Concordia's two transcripts: a fork (sanctions off from month 1) against its parent, month by "
     "month from the branch, side by side, the lines only one has marked", "compare:fork", "tab=Forks"),
    ("launch", "Launch", "the launch form (a config, a YAML file, a sweep or a fork)", "", ""),
]


def _name(i: int, slug: str, pick: str, extra: str) -> str:
    views = [p.split("=")[1] for p in extra.split("&") if p.split("=")[0] in ("tab", "charts", "view", "chart")]
    parts = [slug, pick.replace("compare:", ""), *(v.replace("+", "-").replace("_", "-").lower() for v in views)]
    return f"{i:02d}-{'-'.join(p for p in parts if p)}.png"


def _busy_tick(url: str, run_id: str) -> int:
    """A grid game's first step at which beams were fired (tagging and cleaning both if one has), else its step 1."""
    from sim.store import queries

    states = queries.states(queries.open_reader(url), run_id, 1, 10_000)
    both = [t for t, s in states.items() if s.get("beams") and s.get("cleans")]
    some = [t for t, s in states.items() if s.get("beams") or s.get("cleans")]
    return (both or some or [1])[0]


def shoot(url: str, out: Path) -> list[tuple[str, str]]:
    """Every page's picture into `out`; returns (file, what it shows)."""
    from sim.store import queries

    runs = queries.list_runs(queries.open_reader(url))
    made = []
    with browser.served_app(url, out / "streamlit.log", flags=("--allow-write",)) as base, browser.chrome() as driver:
        for i, (slug, heading, what, pick, extra) in enumerate(PAGES):
            run_id, chosen = None, ""
            if pick.startswith("compare:"):
                chosen = CHOICES[pick.split(":", 1)[1]](runs)
            elif pick:
                run_id = PICKS[pick](runs)
            if "tick=beams" in extra and run_id is not None:
                extra = extra.replace("tick=beams", f"tick={_busy_tick(url, run_id)}")
            query = "&".join(p for p in ((f"run={run_id}" if run_id else ""), chosen, extra) if p)
            charts = slug not in ("runs", "launch", "policies", "conversations", "events")
            if pick and not pick.startswith("compare:") and run_id is None:  # this store has no run of that kind
                charts = False
                what += f" (this store has no {pick} run: the page shows its newest run)"
            try:
                browser.open_page(driver, f"{base}/{slug}" + (f"?{query}" if query else ""), heading, charts=charts,
                                  charts_required=False)  # (a run may have nothing to chart on a page: it says so)
            except Exception as exc:  # noqa: BLE001 - a page that does not draw is shot as it is, and said so
                what += f" (did not finish drawing: {type(exc).__name__})"
            name = _name(i, slug, pick, extra)
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
