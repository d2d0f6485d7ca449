"""The store's bulk writes (sim/store/bulk.py): COPY and multi-row INSERTs store exactly what one row at a time did,
a tick stays all or nothing, and a writer killed in the middle of one leaves the ticks committed before it."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import JSON, Text, cast, func, insert, select
from sqlmodel import SQLModel

from agents.scripted import ScriptedBackend
from conftest import ROOT, cli_json
from runner.config import build_spec
from runner.execution import RunFailed, execute
from scenarios import get_scenario
from sim.core.contracts import Event
from sim.core.records import StepColumns, TickRecord
from sim.store import bulk
from sim.store.encoding import dumps
from sim.store.store import Store
from sim.store.tables import AgentStep, EventRow, LLMCall, RunAgent
from test_resume import llm_spec

#: what differs between two stores of the same runs however they are written: when, how long, by which process
VOLATILE = {"runs": {"id", "created_at", "finished_at", "heartbeat_at", "duration_s", "owner_pid"},
            "ticks": {"duration_s"}, "llm_calls": {"latency_s"}, "sweeps": {"created_at", "updated_at"}}


def _url(db: str, tmp_path: Path, name: str, pg_url_factory) -> str:
    return f"sqlite:///{tmp_path / name}" if db == "sqlite" else pg_url_factory()


def every_row(store: Store, ids: bool = True) -> dict[str, list[tuple]]:
    """Every table's rows in key order, JSON as the text stored, each run id as the run's place in creation order
    (`ids=False`: without the rows' own ids, which PostgreSQL's sequences leave with gaps where a tick rolled back)."""
    out: dict[str, list[tuple]] = {}
    with store.engine.connect() as conn:
        runs = {r: i for i, r in enumerate(conn.execute(select(SQLModel.metadata.tables["runs"].c.id)
                                                         .order_by("created_at")).scalars())}
        for name, table in SQLModel.metadata.tables.items():
            columns = [c for c in table.columns if c.name not in VOLATILE.get(name, ()) and (ids or c.name != "id")]
            chosen = [cast(c, Text) if isinstance(c.type, JSON) else c for c in columns]
            order = [table.c.created_at] if name == "runs" else list(table.primary_key.columns)  # (ids: insertion order)
            rows = [tuple(runs.get(v, v) if c.name in ("run_id", "parent_id") else v for c, v in zip(columns, row))
                    for row in conn.execute(select(*chosen).order_by(*order)).all()]
            keys = [i for i, c in enumerate(columns) if c.primary_key]
            if name != "runs" and "run_id" in {columns[i].name for i in keys}:  # (keyed by the random run id: re-sorted)
                rows.sort(key=lambda r: tuple(r[i] for i in keys))
            out[name] = rows
    return out


def write_runs(url: str) -> dict[str, list[tuple]]:
    """The same runs every time: the fishery with sanctions (three phases, events), its mixed LLM population (LLM
    calls), the social network (several phases, many events), the donor game (agents join every generation), and a
    tick of awkward values (NaN, -0.0, text with tabs, newlines and backslashes, None in JSON columns)."""
    store = Store(url)
    execute(build_spec("commons", ticks=4, sets=["sanctions=true", "fishers=6"], seed=2), store)
    execute(llm_spec(seed=4), store)
    execute(build_spec("social", ticks=3, sets=["agents=60"], seed=1), store)
    execute(build_spec("donor", sets=["generations=2"], seed=5), store)
    run_id = store.create_run(build_spec("commons", ticks=1), {})
    odd = "tab\there\nnew line \\ backslash \"quoted\" \\N é ☃"
    steps = StepColumns([1, 2, 3, 7], ["scripted", "llm", "llm:1", "scripted"], [0.5, -0.0, 5e-324, 1e300],
                        [1.0, 2.0, 3.0, -4.0], [("talk", {1: odd, 3: None}), ("harvest", {1: 3, 2: -0.0, 7: {"a": [1, 2]}})],
                        {2: odd}, {1: {"notes": [odd], "n": 1}}, None)
    record = TickRecord(1, {"m": 1.5, "bad": math.inf}, {"s": odd}, steps,
                        [Event("say", 1, None, {"text": odd}), Event("none", None, 2, {}), Event("nan", 3, 3, {"x": math.nan})])
    calls = [{"key": "k1", "tick": 1, "agent_id": 1, "phase": "talk", "backend": "llm", "model_id": "m", "prompt": odd,
              "answer": odd, "value": None, "completion_ids": [1, 2], "logprobs": [-0.5, math.nan]},
             {"key": "k2", "tick": 1, "agent_id": 2, "phase": "talk", "backend": "llm", "model_id": "m", "prompt": "",
              "answer": "", "value": {"x": odd}, "cache_hit": True, "tokens_in": 3}]
    store.record_tick(run_id, record, calls, duration_s=0.25)
    store.add_agents(run_id, [{"agent_id": 1, "joined": 0, "role": "r", "policy": None, "strategy": None, "persona": odd,
                               "extra": {"t": (1, 2), 3: math.nan}}])
    rows = every_row(store)
    store.close()
    return rows


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_bulk_writes_store_the_same_rows_as_one_statement_a_row(db, tmp_path, pg_url_factory, monkeypatch):
    """The same runs written through COPY (PostgreSQL) or multi-row INSERTs (SQLite) and through the driver's
    executemany give every table the same rows, column for column."""
    fast_url, plain_url = _url(db, tmp_path, "fast.db", pg_url_factory), _url(db, tmp_path, "plain.db", pg_url_factory)
    fast = write_runs(fast_url)
    assert bulk.way(Store(fast_url).engine.dialect) == ("copy" if db == "postgresql" else "multi-row")
    monkeypatch.setattr(bulk, "way", lambda dialect: "executemany")
    plain = write_runs(plain_url)
    assert set(fast) == set(SQLModel.metadata.tables)
    for name in fast:
        assert fast[name] == plain[name], f"table {name} differs"
    assert len(fast["agent_steps"]) > 300 and len(fast["events"]) > 50 and len(fast["llm_calls"]) > 10
    assert len(fast["run_agents"]) > 20


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_rows_made_for_bulk_writes_are_what_sqlalchemys_insert_stores(db, tmp_path, pg_url_factory):
    """Events, LLM calls and agents turned into driver rows (each column's bind processor, JSON by the store's
    encoder) store what SQLAlchemy's insert() of the same mappings stores: JSON None as null, NaN as null, tuples
    as lists."""
    store = Store(_url(db, tmp_path, "same.db", pg_url_factory))
    odd = "a\tb\nc\\d\"e\" \\N"
    a, b = (store.create_run(build_spec("commons", ticks=1), {}) for _ in range(2))
    tables = {
        EventRow.__table__: [{"tick": 1, "kind": odd, "actor": None, "target": 3, "data": {"x": (1, math.nan), "y": odd}},
                             {"tick": 1, "kind": "k", "actor": 1, "target": None, "data": None}],
        LLMCall.__table__: [{"key": odd, "tick": 2, "agent_id": 1, "phase": "p", "backend": "llm", "model_id": "m",
                             "prompt": odd, "answer": "", "value": None, "tokens_in": 1, "tokens_out": 2, "latency_s": 0.1,
                             "cache_hit": True, "fallback": False, "attempts": 2, "completion_ids": None,
                             "logprobs": [-1.5, math.inf]}],
        RunAgent.__table__: [{"agent_id": 4, "joined": 0, "role": "r", "policy": None, "strategy": "s", "persona": odd,
                              "profile": {"k": [odd]}}],
    }
    with store.engine.begin() as conn:
        for table, rows in tables.items():
            columns = ("run_id", *rows[0])
            conn.execute(insert(table), [{"run_id": a, **r} for r in rows])
            bulk.insert_rows(conn, table, columns, bulk.driver_rows(conn.dialect, table, columns,
                                                                    [{"run_id": b, **r} for r in rows], dumps))
    with store.engine.connect() as conn:
        for table, rows in tables.items():
            chosen = [cast(c, Text) if isinstance(c.type, JSON) else c for c in table.columns if c.name not in ("id", "run_id")]
            stored = {run: conn.execute(select(*chosen).where(table.c.run_id == run).order_by(*table.primary_key.columns)).all()
                      for run in (a, b)}
            assert len(stored[a]) == len(rows) and stored[a] == stored[b], table.name
        events = EventRow.__table__.c
        data = conn.execute(select(cast(events.data, Text)).where(events.run_id == b).order_by(events.id)).scalars().all()
    assert data[1] == "null" and '"x":[1,null]' in data[0], "JSON None is JSON null (not SQL NULL), NaN is null"


class FailingCalls(ScriptedBackend):
    """The scenario's scripted strategies, logging at tick 2 a call the database refuses (no agent id)."""

    def __init__(self, strategies) -> None:
        super().__init__(strategies)
        self.drained = 0

    def drain_calls(self) -> list[dict]:
        self.drained += 1
        if self.drained < 2:
            return []
        return [{"key": "k", "tick": 2, "agent_id": None, "phase": "harvest", "backend": "llm", "model_id": "m",
                 "prompt": "", "answer": ""}]


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_a_tick_whose_bulk_write_fails_midway_stores_nothing_of_it(db, tmp_path, pg_url_factory):
    """A row the database refuses after the tick's steps and events went in (an LLM call without its agent) rolls
    the whole tick back: the run fails with tick 1 stored whole and nothing of tick 2."""
    store = Store(_url(db, tmp_path, "fail.db", pg_url_factory))
    spec = build_spec("commons", ticks=3, sets=["fishers=2000", "capacity=40000"])
    with pytest.raises(RunFailed):
        execute(spec, store, backends={"scripted": FailingCalls(get_scenario("commons").strategies)})
    [run] = store.list_runs()
    assert run.status == "failed" and run.ticks == 1
    assert [t.tick for t in store.ticks(run.id)] == [1]
    assert {s.tick for s in store.steps(run.id)} == {1} and len(store.steps(run.id)) == 2000
    assert {e.tick for e in store.events(run.id)} == {1} and store.llm_calls(run.id) == []


KILLED_CHILD = """
import sys, time
from pathlib import Path
from sim.store import bulk

flag, chosen = Path(sys.argv[2]), bulk.insert_rows

def insert_rows(conn, table, columns, rows):
    if table.name == "agent_steps" and len(rows) and rows[0][1] == 3:  # tick 3: half its steps, then wait for the kill
        chosen(conn, table, columns, rows[: len(rows) // 2])
        flag.touch()
        time.sleep(600)
    chosen(conn, table, columns, rows)

bulk.insert_rows = insert_rows
import sim.store.store as store_mod
store_mod.insert_rows = insert_rows
from societas.cli import main
sys.argv = ["societas", "run", "commons", "--set", "fishers=3000", "--set", "months=5", "--seed", "7", "--db", sys.argv[1]]
main()
"""


@pytest.mark.parametrize("db", ["sqlite", "postgresql"])
def test_a_writer_killed_in_the_middle_of_a_bulk_write_keeps_the_ticks_before_and_resumes_to_the_same_run(
        db, tmp_path, pg_url_factory):
    """kill -9 while tick 3's agent steps are half written (mid-COPY, mid multi-row INSERTs): ticks 1-2 stay whole,
    nothing of tick 3 is stored, and `societas resume` ends where an uninterrupted run ends."""
    url, flag = _url(db, tmp_path, "killed.db", pg_url_factory), tmp_path / "half-written"
    child = subprocess.Popen([sys.executable, "-c", KILLED_CHILD, url, str(flag)], cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.time() + 240
    while not flag.exists() and child.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert flag.exists(), child.stderr.read().decode() if child.poll() is not None else "tick 3 never began"
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    store = Store(url, create=False)
    [run] = store.list_runs()
    assert run.status == "running" and run.ticks == 2
    assert [t.tick for t in store.ticks(run.id)] == [1, 2]
    with store.engine.connect() as conn:
        per_tick = dict(conn.execute(select(AgentStep.tick, func.count()).where(AgentStep.run_id == run.id)
                                     .group_by(AgentStep.tick)).all())
    assert per_tick == {1: 3000, 2: 3000}
    resumed = cli_json("resume", run.id, db=url)
    assert resumed["ticks"] == 5
    reference = Store(f"sqlite:///{tmp_path / 'reference.db'}")
    execute(build_spec("commons", sets=["fishers=3000", "months=5"], seed=7), reference)
    resumed_rows, reference_rows = every_row(store, ids=False), every_row(reference, ids=False)
    for name in resumed_rows:
        assert resumed_rows[name] == reference_rows[name], f"table {name} differs"
