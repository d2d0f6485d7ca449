"""The store: migrations match the table models, one transaction per tick, honest statuses."""

import gc

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlmodel import SQLModel

from runner.config import build_spec
from runner.execution import execute
from sim.store.store import Store


def test_migrated_schema_matches_the_models(store):
    """Alembic's head schema and the SQLModel tables agree (no pending autogenerate diff)."""
    with store.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": False})
        diff = [d for d in compare_metadata(ctx, SQLModel.metadata) if not (isinstance(d, tuple) and d[0] == "remove_table")]
    assert diff == []
    with store.engine.connect() as conn:
        assert MigrationContext.configure(conn).get_current_revision() == "0006"


def test_reopening_a_store_keeps_its_runs(db_url):
    """Opening an existing database migrates nothing away: stored runs stay."""
    first = Store(db_url)
    r = execute(build_spec("commons", ticks=2), first)
    again = Store(db_url)
    assert [x.id for x in again.list_runs()] == [r.run_id]
    assert len(again.ticks(r.run_id)) == 2


def test_a_tick_is_all_or_nothing(store, monkeypatch):
    """If committing a tick fails midway, none of its rows are stored, and the run is marked failed."""
    from sim.store import store as store_mod
    from runner.execution import RunFailed

    real = store_mod.dumps
    calls = {"n": 0, "limit": 10**9}

    def boom(value):
        calls["n"] += 1
        if calls["n"] > calls["limit"]:
            raise RuntimeError("disk on fire")
        return real(value)

    monkeypatch.setattr(store_mod, "dumps", boom)
    execute(build_spec("commons", ticks=1, sets=["sanctions=true"]), store)  # how many encodings tick 1 makes
    first = calls["n"]
    store.delete_run(store.list_runs()[0].id)
    calls.update(n=0, limit=first + 2)  # fail midway through tick 2's agent steps, after its tick row went in
    with pytest.raises(RunFailed, match="disk on fire"):
        execute(build_spec("commons", ticks=5, sets=["sanctions=true"]), store)
    run = store.list_runs()[0]
    assert run.status == "failed" and "disk on fire" in run.reason
    assert [t.tick for t in store.ticks(run.id)] == [1] and run.ticks == 1
    assert {s.tick for s in store.steps(run.id)} == {1}
    assert {e.tick for e in store.events(run.id)} == {1} and len(store.events(run.id)) == 7


def test_delete_run_removes_every_row_of_that_run_only(store):
    """delete_run drops the run's ticks, steps, events and the run row; another run is untouched."""
    gone = execute(build_spec("commons", ticks=3, sets=["sanctions=true"]), store).run_id
    kept = execute(build_spec("commons", ticks=2, seed=1), store).run_id
    assert store.delete_run(gone) is True
    assert [r.id for r in store.list_runs()] == [kept]
    assert store.ticks(gone) == [] and store.steps(gone) == [] and store.events(gone) == [] and store.llm_calls(gone) == []
    assert len(store.ticks(kept)) == 2 and store.steps(kept)
    assert store.delete_run(gone) is False


def _alembic_config():
    from alembic.config import Config

    from sim.store.schema import MIGRATIONS

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def test_the_schema_head_is_the_newest_migration():
    """schema.HEAD, what a store is checked against without loading Alembic, is the head Alembic reads in migrations/."""
    from alembic.script import ScriptDirectory

    from sim.store.schema import HEAD, known_revisions

    script = ScriptDirectory.from_config(_alembic_config())
    assert script.get_current_head() == HEAD
    assert HEAD in known_revisions() and len(known_revisions()) == len(list(script.walk_revisions()))


def test_an_older_schema_is_refused_until_upgraded_and_a_newer_one_always(tmp_path):
    """A store at an older revision is refused with the command that migrates it, which then brings it to HEAD;
    a revision this code does not know (a newer societas wrote it) is refused, and `upgrade` refuses it too."""
    from alembic import command
    from sqlalchemy import create_engine, text

    from sim.core.errors import UsageError
    from sim.store.schema import HEAD, check_writable, upgrade

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    cfg = _alembic_config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0004")
    with pytest.raises(UsageError, match=f"schema is 0004, this societas needs {HEAD}: run `societas db upgrade`"):
        Store(url, create=False)
    gc.collect()  # (the refused Store's engine closed: SQLite folds its write-ahead log back into the file)
    before = (tmp_path / "old.db").read_bytes()
    with pytest.raises(UsageError, match=f"schema is 0004, this societas needs {HEAD}"):
        check_writable(url)  # what a configuration naming the store checks: refused too, the file untouched
    assert (tmp_path / "old.db").read_bytes() == before
    assert all(p.stat().st_size == 0 for p in tmp_path.glob("old.db-wal"))  # (read-only: SQLite's empty log at most)
    check_writable(f"sqlite:///{tmp_path / 'new.db'}")  # a store not made yet is fine, and is not made by the check
    assert not (tmp_path / "new.db").exists()
    assert upgrade(url) == f"upgraded 0004 -> {HEAD}"
    assert Store(url, create=False).list_runs() == []
    assert upgrade(url) == "already at the newest schema"
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    for attempt in (lambda: Store(url, create=False), lambda: upgrade(url), lambda: check_writable(url)):
        with pytest.raises(UsageError, match="schema \\(9999\\) is not one this societas knows .* a newer societas wrote it"):
            attempt()
    engine.dispose()


def test_reward_vectors_are_packed_per_tick_and_runs_stored_as_json_rows_read_export_and_replay_the_same(db_url, tmp_path):
    """A tick's reward vectors go into one packed row, read back into every step's `components`; a run whose vectors
    are JSON in each step row (stored before 0006: what the downgrade writes) reads, exports and replays identically."""
    from alembic import command
    from sqlalchemy import text

    from analysis.frames import export_run
    from runner.replay import replay_run

    store = Store(db_url)
    sets = ["sanctions=true", "reward_weights={payoff: 1, envy: -0.5, norm_broken: -1}",
            "population=[{count: 3, strategy: sustainable}, {count: 2, strategy: greedy}]"]
    run_id = execute(build_spec("commons", ticks=4, sets=sets), store).run_id
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM agent_steps WHERE components IS NOT NULL")).scalar() == 0
        assert conn.execute(text("SELECT count(*) FROM reward_vectors WHERE run_id = :r"), {"r": run_id}).scalar() == 4
    packed = [(s.tick, s.agent_id, s.components) for s in store.steps(run_id)]
    agents = [a.model_dump() for a in store.run_agents(run_id)]
    assert all(c and "payoff" in c for *_, c in packed) and any("norm_broken" in c for *_, c in packed)
    export_run(store, run_id, tmp_path / "packed", "csv")
    store.close()

    cfg = _alembic_config()
    engine = Store(db_url).engine
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, "0005")  # the vectors back into each step's row, as runs stored before kept them
    with engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM agent_steps WHERE components IS NULL")).scalar() == 0
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0006")
    engine.dispose()
    old = Store(db_url)
    assert [(s.tick, s.agent_id, s.components) for s in old.steps(run_id)] == packed
    assert [a.model_dump() for a in old.run_agents(run_id)] == agents and len(agents) == 5
    export_run(old, run_id, tmp_path / "rows", "csv")
    for table in ("agent_steps", "ticks", "events"):
        assert (tmp_path / "rows" / f"{table}.csv").read_bytes() == (tmp_path / "packed" / f"{table}.csv").read_bytes()
    assert replay_run(old, run_id)["matched"]


@pytest.mark.parametrize("ids", [[], [7], [1, 2, 3, 4, 5, 6], [3, 40, 41, 70_000, 2**40]])
def test_packed_reward_vectors_read_back_as_the_json_rows_did(ids):
    """Packing keeps every value (one value for all, few distinct, all distinct, NaN and inf as null, -0.0 as no
    component) under any ids, and reads back each agent's vector as its JSON row read back."""
    import json

    import numpy as np

    from sim.core.records import RewardVectors
    from sim.store.encoding import dumps
    from sim.store.vectors import pack, read_vectors

    rng = np.random.default_rng(len(ids))
    n = len(ids)
    columns = {"payoff": rng.integers(-2, 3, n).astype(float), "welfare": np.full(n, 0.1 + 0.2),
               "envy": rng.random(n) * 1e-3, "fined": np.where(rng.random(n) < 0.5, -0.0, 2.5),
               "odd ünïcode": np.array([float("nan"), float("inf"), -float("inf"), 1e308, -5e-324, 0.0][:n] + [1.0] * (n - 6))}
    vectors = RewardVectors(ids, columns)
    got = read_vectors(pack(vectors))
    assert list(got) == ids
    assert got == {aid: json.loads(dumps(vectors.vector(i))) for i, aid in enumerate(ids)}
    for i, vec in enumerate(got.values()):
        assert vec["payoff"] == columns["payoff"][i] and vec.get("fined", 0.0) == columns["fined"][i]
        assert ("fined" in vec) == (columns["fined"][i] == 2.5)  # a -0.0 is no component


def test_new_stores_made_by_threads_at_once_all_get_their_schema(tmp_path):
    """Threads of one process making new stores at once (in memory, or files in different folders: no lock shared)
    each get the schema: Alembic's commands run through module globals, so two at once broke one ("KeyError: 'script'")
    where a verifiers eval's episodes open their stores in threads."""
    import threading

    urls = ["sqlite://"] * 3 + [f"sqlite:///{tmp_path / f'd{i}' / 'runs.db'}" for i in range(3)]
    for i in range(3):
        (tmp_path / f"d{i}").mkdir()
    start, errors, stores = threading.Barrier(len(urls)), [], []

    def make(url: str) -> None:
        start.wait()
        try:
            store = Store(url)
            assert store.list_runs() == []  # (in this thread: an in-memory store is its thread's connection)
            stores.append(store)
        except Exception as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=make, args=(u,)) for u in urls]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(stores) == len(urls)
    for s in stores:
        s.close()


def test_threads_making_one_new_sqlite_store_at_once_all_open_it(tmp_path):
    """Four threads open each of 40 new SQLite stores at once: every one opens it (the first connection, which switches
    the file to WAL, ran outside the schema lock, and 1 of 30 such stores refused a thread: "database is locked")."""
    import threading

    errors: list[str] = []

    def open_store(url: str) -> None:
        try:
            Store(url).close()
        except Exception as exc:  # noqa: BLE001 - any refusal is the failure
            errors.append(str(exc))

    for i in range(40):
        url = f"sqlite:///{tmp_path / f'runs{i}.db'}"
        threads = [threading.Thread(target=open_store, args=(url,)) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[:3]
