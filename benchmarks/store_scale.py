"""Store benchmark: what committing one tick costs SQLite and PostgreSQL at 1,000, 10,000 and 100,000 agent steps.

Real ticks, not made-up rows: the scripted fishery (one decision phase, one event a tick) and the social network
(two phases, its posts, votes and follows as events) are stepped without a store at each size and their tick
records kept. Each record is then committed by `Store.record_tick` into a fresh run, once through the store's bulk
path (sim.store.bulk: COPY on PostgreSQL, multi-row INSERTs on SQLite) and once through the driver's executemany
(the path before it: one statement per row), in paired rounds (the first place alternating, so that a slow spell
of this shared machine falls on both). Reported per tick: wall seconds, this process's CPU seconds and, on
PostgreSQL, the CPU seconds of the server's processes for the benchmark's own database (read from /proc, the
server being on this machine; None otherwise), each the median of the rounds, and the ratios executemany / bulk
(median of the rounds' ratios). Also once per run: the agents' rows (`add_agents`, the run's who-is-who).

CPU seconds say more than wall seconds here: this 2-core machine is shared, and a loaded one stretches wall
time by whatever else runs.

    python benchmarks/store_scale.py [--sizes 1000 10000 100000] [--scenarios commons social] [--rounds 3]
                                     [--pg URL]   (default $SOCIETAS_TEST_PG; none: SQLite only)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import create_engine, make_url, text  # noqa: E402

from benchmarks.engine import engine_model  # noqa: E402
from runner.config import build_spec  # noqa: E402
from sim.core.records import TickRecord  # noqa: E402
from sim.store import bulk  # noqa: E402
from sim.store.store import Store  # noqa: E402

#: each scenario's --set pairs for `n` agents (scripted; the fishery's lake sized so that nobody starves)
CASES: dict[str, Callable[[int], list[str]]] = {
    "commons": lambda n: [f"fishers={n}", "strategy=random", f"capacity={20 * n}", "collapse_below=0"],
    "social": lambda n: [f"agents={n}"],
}
WAYS = ("bulk", "executemany")


def ticks_of(scenario: str, n: int, ticks: int) -> tuple[list[str], list[dict[str, Any]], list[TickRecord]]:
    """(the --sets, the agents' profiles, the records of the first `ticks` ticks) of the scenario at `n` agents."""
    sets = [*CASES[scenario](n), f"{'months' if scenario == 'commons' else 'ticks'}={ticks}"]
    model = engine_model(scenario, sets)
    profiles = model.take_joined()
    records: list[TickRecord] = []
    model.on_tick = records.append
    while model.running and model.tick < ticks:
        model.step()
    return sets, profiles, records


@contextmanager
def forced(how: str) -> Iterator[None]:
    """The store's bulk inserts go the way `how` names ("bulk": the database's own)."""
    chosen = bulk.way
    if how != "bulk":
        bulk.way = lambda dialect: how
    try:
        yield
    finally:
        bulk.way = chosen


class ServerCPU:
    """CPU seconds of the PostgreSQL server processes serving one database (None: not on this machine)."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url) if url.startswith("postgresql") else None  # (its own connection: not counted)
        self.tick = os.sysconf("SC_CLK_TCK")

    def seconds(self) -> Optional[float]:
        if self.engine is None:
            return None
        with self.engine.connect() as conn:
            pids = conn.execute(text("SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                                     "AND pid <> pg_backend_pid()")).scalars().all()
        total = 0.0
        for pid in pids:
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                return None
            total += (int(fields[11]) + int(fields[12])) / self.tick
        return total


def commit_run(store: Store, server: ServerCPU, scenario: str, sets: list[str], profiles: list[dict[str, Any]],
               records: list[TickRecord]) -> dict[str, Any]:
    """One fresh run of the records: seconds (wall, client CPU, server CPU) of its agents' rows and per tick."""
    run_id = store.create_run(build_spec(scenario, sets=sets, seed=1), {})

    def timed(fn: Callable[[], None]) -> tuple[float, float, Optional[float]]:
        s0 = server.seconds()
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        w, c = time.perf_counter() - w0, time.process_time() - c0
        s1 = server.seconds()
        return w, c, None if s0 is None or s1 is None else s1 - s0

    agents = timed(lambda: store.add_agents(run_id, profiles))
    ticks = [timed(lambda r=r: store.record_tick(run_id, r)) for r in records]
    per_tick = [statistics.mean(t[i] for t in ticks) if ticks[0][i] is not None else None for i in range(3)]
    return {"agents": agents, "tick": per_tick}


def measure(url: str, scenario: str, n: int, sets: list[str], profiles: list[dict[str, Any]], records: list[TickRecord],
            rounds: int) -> dict[str, Any]:
    """Paired rounds of both ways on the store at `url`: medians per way, and the ratios executemany / bulk."""
    store = Store(url)
    server = ServerCPU(url)
    got: dict[str, list[dict[str, Any]]] = {w: [] for w in WAYS}
    for k in range(rounds):
        for how in (WAYS if k % 2 == 0 else WAYS[::-1]):
            with forced(how):
                got[how].append(commit_run(store, server, scenario, sets, profiles, records))
    store.close()
    if server.engine is not None:
        server.engine.dispose()

    def median(how: str, part: str, i: int) -> Optional[float]:
        values = [r[part][i] for r in got[how]]
        return None if values[0] is None else round(statistics.median(values), 4)

    out: dict[str, Any] = {"database": make_url(url).get_backend_name(), "bulk_way": bulk.way(store.engine.dialect),
                           "agent_steps_per_tick": len(records[0].steps), "events_per_tick": len(records[0].events)}
    for how in WAYS:
        wall, cpu, server_cpu = (median(how, "tick", i) for i in range(3))
        total = cpu + (server_cpu or 0.0)
        out[how] = {"tick_wall_s": wall, "tick_cpu_s": cpu, "tick_server_cpu_s": server_cpu,
                    "tick_cpu_s_with_server": round(total, 4),
                    "agent_steps_per_cpu_s": round(len(records[0].steps) / total) if total else None,
                    "agents_wall_s": median(how, "agents", 0), "agents_cpu_s": median(how, "agents", 1),
                    "agents_server_cpu_s": median(how, "agents", 2)}

    def ratio(i: int, part: str = "tick", server_too: bool = True) -> float:
        per = []
        for old, new in zip(got["executemany"], got["bulk"]):
            a, b = old[part][i], new[part][i]
            if server_too and i == 1 and old[part][2] is not None:
                a, b = a + old[part][2], b + new[part][2]
            per.append(a / b if b else float("nan"))
        return round(statistics.median(per), 2)

    out["executemany_over_bulk"] = {"tick_wall": ratio(0), "tick_cpu_with_server": ratio(1),
                                    "agents_wall": ratio(0, "agents"), "agents_cpu_with_server": ratio(1, "agents")}
    return out


@contextmanager
def pg_database(base: str) -> Iterator[str]:
    """A fresh PostgreSQL database on the server of `base`, dropped afterwards (only the one made here)."""
    name = f"store_scale_{uuid.uuid4().hex[:8]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000], help="agent steps a tick")
    ap.add_argument("--scenarios", nargs="+", default=list(CASES), choices=list(CASES))
    ap.add_argument("--ticks", type=int, default=2, help="ticks committed per run (their mean is a run's tick)")
    ap.add_argument("--rounds", type=int, default=3, help="paired rounds (medians; first place alternating)")
    ap.add_argument("--pg", default=os.environ.get("SOCIETAS_TEST_PG"), help="a PostgreSQL URL (default $SOCIETAS_TEST_PG)")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "store_scale-cpu.json"))
    args = ap.parse_args()
    load = [round(os.getloadavg()[0], 2)]
    cases = []
    with tempfile.TemporaryDirectory() as tmp:
        for scenario in args.scenarios:
            for n in args.sizes:
                sets, profiles, records = ticks_of(scenario, n, args.ticks)
                urls = [f"sqlite:///{Path(tmp) / f'{scenario}-{n}.db'}"]
                for url in urls + ([args.pg] if args.pg else []):
                    if url.startswith("sqlite"):
                        case = measure(url, scenario, n, sets, profiles, records, args.rounds)
                    else:
                        with pg_database(url) as fresh:
                            case = measure(fresh, scenario, n, sets, profiles, records, args.rounds)
                    case = {"scenario": scenario, "agents": n, "sets": sets, **case}
                    print(json.dumps(case), flush=True)
                    cases.append(case)
                del profiles, records
    load.append(round(os.getloadavg()[0], 2))
    out = {"benchmark": "store_scale", "rounds": args.rounds, "ticks_per_run": args.ticks,
           "machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                       "cpus": os.cpu_count(), "load_1min": load},
           "cases": cases, "when": time.strftime("%Y-%m-%d %H:%M")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
