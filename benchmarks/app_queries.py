"""How fast the app opens a large run: 10,000 agents x 100 ticks (1M agent steps, ~300k events).

Builds a synthetic store (rows inserted directly, shaped like a social run: actions carry an
opinion and a harvest, a seeded follow graph of ~30k edges, every agent in `run_agents`,
follow/unfollow and message events), then times every query the pages make and the
render of every page through Streamlit's AppTest. Writes benchmarks/results/app_queries-cpu.json.

    python benchmarks/app_queries.py [--agents 10000] [--ticks 100] [--db sqlite:///big.db]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from analysis import network as net  # noqa: E402
from sim.store import queries  # noqa: E402
from sim.store.store import Store  # noqa: E402

RUN = "bigrun000001"


def build(path: Path, agents: int, ticks: int, seed: int = 0) -> dict[str, int]:
    """Write one run with `agents` x `ticks` agent steps, follow and message events, straight into SQLite."""
    Store(f"sqlite:///{path}")  # schema via the store's migrations
    rng = random.Random(seed)
    con = sqlite3.connect(path)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    spec = {"scenario": "commons", "config": {"fishers": agents, "months": ticks, "reward_mode": "private"}, "seed": 0,
            "policy": "scripted", "llm": {}}
    con.execute("INSERT INTO runs (id, scenario, seed, policy, spec_digest, spec, status, ticks, final_metrics, versions,"
                " created_at, duration_s) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                (RUN, "commons", 0, "scripted", "big", json.dumps(spec), "finished", ticks,
                 json.dumps({"survival_time": ticks, "collapsed": 0, "gain": 1.0}), "{}", now, 1.0))
    seeded = sorted({(a, int(rng.paretovariate(1.2)) % agents) for a in range(agents) for _ in range(3)})
    con.execute("UPDATE runs SET initial = ? WHERE id = ?", (json.dumps({"follows": [list(e) for e in seeded]}), RUN))
    con.executemany("INSERT INTO run_agents (run_id, agent_id, joined, role, policy, strategy, persona, profile)"
                    " VALUES (?,?,?,?,?,?,?,?)", [(RUN, a, 0, "fisher", "scripted", "sustainable", "", "{}") for a in range(agents)])
    opinions = [rng.uniform(-1, 1) for _ in range(agents)]
    n_steps = n_events = 0
    for t in range(1, ticks + 1):
        con.execute("INSERT INTO ticks (run_id, tick, metrics, state, duration_s) VALUES (?,?,?,?,?)",
                    (RUN, t, json.dumps({"stock": 100 - t * 0.5, "perolat_efficiency": t / 10, "norm_statements": 0}),
                     json.dumps({"stock": 100 - t * 0.5, "stock_start": 100.0, "mean_opinion": sum(opinions) / agents}), 0.1))
        rows = []
        for a in range(agents):
            opinions[a] = max(-1.0, min(1.0, opinions[a] + rng.gauss(0, 0.02)))
            rows.append((RUN, t, a, "scripted", json.dumps({"harvest": rng.randrange(10), "post": {"opinion": round(opinions[a], 3)}}), rng.random(),
                         rng.random(), 0, None, "{}"))
        con.executemany("INSERT INTO agent_steps (run_id, tick, agent_id, backend, action, payoff, reward, fallback, reason,"
                        " memory) VALUES (?,?,?,?,?,?,?,?,?,?)", rows)
        n_steps += len(rows)
        ev = []
        for _ in range(agents // 5):  # follows skewed to low ids (hubs)
            ev.append((RUN, t, "follow", rng.randrange(agents), int(rng.paretovariate(1.2)) % agents, "{}"))
        for _ in range(agents // 20):
            ev.append((RUN, t, "unfollow", rng.randrange(agents), rng.randrange(agents), "{}"))
        for _ in range(agents // 10):
            ev.append((RUN, t, "comment", rng.randrange(agents), rng.randrange(agents),
                       json.dumps({"text": "I agree with you about the lake."})))
        con.executemany("INSERT INTO events (run_id, tick, kind, actor, target, data) VALUES (?,?,?,?,?,?)", ev)
        n_events += len(ev)
    con.commit()
    con.close()
    return {"agent_steps": n_steps, "events": n_events}


WALL: dict[str, float] = {}
CPU: dict[str, float] = {}


def timed(label: str, fn, *args, **kwargs):
    """Run fn; its wall and process-CPU seconds go to WALL/CPU[label] (a shared machine inflates wall time)."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    WALL[label], CPU[label] = time.perf_counter() - start, time.process_time() - cpu
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--agents", type=int, default=10_000)
    ap.add_argument("--ticks", type=int, default=100)
    ap.add_argument("--keep", help="build into (or reuse) this SQLite file and keep it")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "app_queries-cpu.json"))
    args = ap.parse_args()
    path = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="societas-bench-")) / "big.db"
    if path.exists():
        con = sqlite3.connect(path)
        sizes = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("agent_steps", "events")}
        con.close()
    else:
        sizes = timed("build", build, path, args.agents, args.ticks)
    url = f"sqlite:///{path}"
    eng = queries.open_reader(url)
    last = args.ticks
    timed("list_runs", queries.list_runs, eng)
    timed("tick_frame", queries.tick_frame, eng, RUN)
    timed("agent_tick_stats", queries.agent_tick_stats, eng, RUN)
    timed("payoffs_at", queries.payoffs_at, eng, RUN, last)
    timed("agent_count", queries.agent_count, eng, RUN)
    timed("run_agents", queries.run_agents, eng, RUN)
    timed("agent_totals", queries.agent_totals, eng, RUN)
    timed("over_usage", queries.over_usage, eng, RUN, "commons", {"fishers": args.agents})
    timed("agent_series_40", queries.agent_series, eng, RUN, tuple(range(40)), "harvest")
    timed("action_stats", queries.action_stats, eng, RUN, "harvest")
    traj = timed("agent_trajectory", queries.agent_trajectory, eng, RUN, 42)
    timed("agent_llm_calls", queries.agent_llm_calls, eng, RUN, 42)
    timed("event_kinds", queries.event_kinds, eng, RUN)
    timed("norm_timeline", queries.norm_timeline, eng, RUN)
    follows = timed("follow_edges", queries.follow_edges, eng, RUN, last)
    inter = timed("interaction_edges", queries.interaction_edges, eng, RUN, last)
    g = timed("graph_build", net.build_graph, follows)
    metrics = timed("graph_metrics", net.network_metrics, g)
    nodes, _ = timed("graph_sample_and_layout", lambda: net.layout(net.sample(g, 300)))
    timed("node_values_300", queries.node_values, eng, RUN, last, tuple(nodes["agent_id"]), payoffs=False)
    timed("node_payoffs_300", queries.node_values, eng, RUN, last, tuple(nodes["agent_id"]))
    timed("agent_roles_300", queries.agent_roles, eng, RUN, tuple(nodes["agent_id"]))
    timed("conversation_ticks", queries.conversation_ticks, eng, RUN)
    said = timed("conversation_3_ticks", queries.conversation, eng, RUN, (1, 3))

    load = os.getloadavg()[0]
    pages: dict[str, float] = {}
    os.environ["SOCIETAS_DB"] = url
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=300).run()
    for page in ("runs", "run", "agents", "network", "norms", "conversations", "events", "compare", "launch"):
        at.query_params["run"] = RUN
        start = time.perf_counter()
        at.switch_page(f"app_pages/{page}.py").run()
        pages[page] = time.perf_counter() - start
        assert not at.exception, (page, [e.value for e in at.exception])
        assert not at.error, (page, [e.value for e in at.error])
    result = {
        "benchmark": "app_queries", "date": datetime.now(timezone.utc).date().isoformat(),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "processor": platform.processor()},
        "agents": args.agents, "ticks": args.ticks, **sizes, "db_mb": round(path.stat().st_size / 2**20, 1),
        "build_s": round(WALL.get("build", 0.0), 1), "load_average_1min": round(load, 2),
        "query_s": {k: round(v, 3) for k, v in WALL.items() if k != "build"},
        "query_cpu_s": {k: round(v, 3) for k, v in CPU.items() if k != "build"},
        "page_first_render_s": {k: round(v, 3) for k, v in pages.items()},
        "follow_graph": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in metrics.items()},
        "interaction_pairs": len(inter), "agent_ticks": len(traj), "messages_in_3_ticks": len(said),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1))
    if not args.keep:
        path.unlink()
        path.parent.rmdir()


if __name__ == "__main__":
    main()
