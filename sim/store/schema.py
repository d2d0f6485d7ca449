"""The store's engine and schema: open a database URL, create its schema or refuse an old one, migrate it.

SQLite by default (a file, WAL mode, foreign keys on); any SQLAlchemy URL works (PostgreSQL with
`postgresql+psycopg://...`). The schema is made by Alembic (./migrations) when a store is first
opened, under a lock so that processes starting at once on a new store all succeed; an older schema
is refused until `societas db upgrade` (`upgrade`), a newer one always. A store already at `HEAD` opens
without loading Alembic: it is imported only to create or migrate a schema.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional
from urllib.parse import quote

from sqlalchemy import event, inspect, make_url, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError
from sqlmodel import create_engine

from sim.core.errors import UsageError
from sim.store.encoding import dumps
from sim.store.urls import DEFAULT_URL, as_url, default_url  # noqa: F401 - importers have long found them here

if TYPE_CHECKING:  # pragma: no cover - for type checkers: Alembic is imported when a schema changes
    from alembic.config import Config


def absolute_url(url: str) -> str:
    """`url` with a relative SQLite path made absolute (from the current directory), for another process that
    starts elsewhere; other URLs unchanged."""
    path = sqlite_path(url)
    if path is None or path.is_absolute():
        return url
    return str(make_url(url).set(database=str(path.resolve())))


def sqlite_path(url: str) -> Optional[Path]:
    """The database file of a SQLite URL (None for other databases and in-memory SQLite)."""
    if not url.startswith("sqlite"):
        return None
    try:
        database = make_url(url).database
    except ArgumentError:
        return None
    return Path(database) if database and database != ":memory:" else None


def make_engine(url: str, *, create: bool = True) -> Engine:
    """An engine for `url` with the schema at head; a UsageError if it cannot be opened.

    `create=False` (commands that need stored runs: reading, resume, fork) never creates or writes
    one: a missing SQLite file, an empty one or a database without a store's tables is an error. A
    fresh database gets the schema; an older one must be upgraded explicitly (`societas db
    upgrade`); one newer than this code is refused.
    """
    path = sqlite_path(url)
    if path is not None:
        if not path.exists():
            if not create:
                raise UsageError(f"no store at {str(path)!r} (nothing has been run there yet); `societas run` creates one")
            if not path.parent.is_dir():
                raise UsageError(f"cannot open database {url!r}: folder {str(path.parent)!r} does not exist")
        elif path.is_dir():
            raise UsageError(f"cannot open database {url!r}: {str(path)!r} is a folder")
        elif not create:
            _check_sqlite_store(path)
    with _refused_as_usage(url):
        engine = _engine(url)
        prepare_schema(engine, path, upgrade=False, create=create)
        return engine


@contextmanager
def _refused_as_usage(url: str, doing: str = "open") -> Iterator[None]:
    """A database that cannot be reached, named or read, as a one-line UsageError ("cannot open database ...")."""
    try:
        yield
    except UsageError:
        raise
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise UsageError(f"cannot open database {url!r}: {str(exc).splitlines()[0]}") from None
    except SQLAlchemyError as exc:
        raise UsageError(f"cannot {doing} database {url!r}: {str(getattr(exc, 'orig', exc)).splitlines()[0]}") from None


MIGRATIONS = Path(__file__).with_name("migrations")
#: the newest revision in ./migrations: a new migration moves it (tests/test_store.py holds it to Alembic's reading)
HEAD = "0006"


def _alembic_config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return cfg


def schema_versions(engine: Engine) -> tuple[Optional[str], str]:
    """(the database's schema revision or None if it has none, the newest this code knows), read as Alembic
    stores it (its `alembic_version` table) without loading Alembic."""
    with engine.connect() as conn:
        tables = inspect(conn)
        current = None
        if tables.has_table("alembic_version"):
            current = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        if current is None and tables.has_table("runs"):
            current = "unversioned"
    return current, HEAD


@contextmanager
def _schema_lock(engine: Engine, path: Optional[Path]) -> Iterator[None]:
    """One process at a time creates or migrates a schema (concurrent first use of a new store).

    An SQLite store is locked through its folder, never by opening the database file itself: closing
    any descriptor of that file drops every POSIX lock this process holds on it, SQLite's included, and
    a reader in another process, seeing no other connection, would then checkpoint and delete the WAL
    this process is still writing to (its later commits were lost that way).
    """
    if path is not None:
        try:
            fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        except OSError as exc:
            raise UsageError(f"cannot open database at {str(path)!r}: cannot lock its folder ({exc.strerror})") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the flock
    elif engine.dialect.name == "postgresql":
        with engine.connect() as conn:
            conn.execute(text("SELECT pg_advisory_lock(7242531)"))
            try:
                yield
            finally:
                conn.execute(text("SELECT pg_advisory_unlock(7242531)"))
                conn.commit()
    else:
        yield


def prepare_schema(engine: Engine, path: Optional[Path] = None, *, upgrade: bool = False, create: bool = True) -> str:
    """Create the schema in an empty database (unless `create` is False: then UsageError); with `upgrade`,
    migrate an older one. Returns what was done.

    A new SQLite file gets even its first connection under the schema lock: that connection switches the file to
    WAL, which needs the file to itself, and two threads or processes making one store at once otherwise had one of
    them refused ("database is locked", 1 of 30 fresh stores opened by 4 threads)."""
    if path is not None and create and (not path.exists() or path.stat().st_size == 0):
        with _schema_lock(engine, path):
            return _prepare_locked(engine, upgrade)
    current, head = schema_versions(engine)
    if current == head:
        return "current"
    if current is None and not create:
        raise UsageError(f"no store in {engine.url.render_as_string(hide_password=True)!r}: it holds no runs "
                         "(`societas run` creates a store)")
    with _schema_lock(engine, path):
        return _prepare_locked(engine, upgrade)


def _prepare_locked(engine: Engine, upgrade: bool) -> str:
    """`prepare_schema`'s work under the schema lock: the versions read again (another thread or process may have
    made the schema meanwhile), then created or migrated."""
    current, head = schema_versions(engine)
    if current == head:
        return "current"
    if current is not None and (not upgrade or current not in known_revisions()):
        raise UsageError(_schema_refusal(current, head))
    _migrate(engine)
    return "created" if current is None else f"upgraded {current} -> {head}"


def _schema_refusal(current: str, head: str) -> str:
    """Why a store at schema `current` (not `head`) is not opened: a newer societas wrote it, or it needs an upgrade."""
    if current not in known_revisions():
        return (f"the store's schema ({current}) is not one this societas knows (newest: {head}); a newer societas "
                "wrote it: upgrade societas to read it")
    return (f"the store's schema is {current}, this societas needs {head}: run `societas db upgrade` (with the same "
            "--db) first")


def check_writable(url: str) -> None:
    """A UsageError if `make_engine(url)` would refuse the store (a folder that does not exist, a file that is not a
    database, a server that cannot be reached, a schema to upgrade or too new), found without creating or writing
    anything: what a configuration naming a store checks before it is used (verifiers' adapter)."""
    path = sqlite_path(url)
    if path is not None:
        if path.is_dir():
            raise UsageError(f"cannot open database {url!r}: {str(path)!r} is a folder")
        if not path.exists():
            if not path.parent.is_dir():
                raise UsageError(f"cannot open database {url!r}: folder {str(path.parent)!r} does not exist")
            return  # a new store, created at first use
    with _refused_as_usage(url):  # a SQLite file read-only (the store's engine sets its pragmas, WAL mode: a write)
        engine = (_engine(url) if path is None
                  else create_engine(f"sqlite:///file:{quote(str(path.resolve()))}?mode=ro&uri=true"))
        try:
            current, head = schema_versions(engine)
        finally:
            engine.dispose()
    if current is not None and current != head:
        raise UsageError(_schema_refusal(current, head))


def known_revisions() -> set[str]:
    """Every schema revision in ./migrations, as Alembic reads the folder."""
    from alembic.script import ScriptDirectory

    return {rev.revision for rev in ScriptDirectory.from_config(_alembic_config()).walk_revisions()}


#: one Alembic command at a time in this process: its commands run through module globals (`alembic.context`,
#: `alembic.op`), so two threads migrating stores at once, which no schema lock orders (stores in memory, or files
#: in different folders: a verifiers eval's episodes open theirs in threads), broke each other's
_MIGRATING = threading.Lock()


def _migrate(engine: Engine) -> None:
    """Create the schema, or migrate it to `HEAD`, with Alembic (the caller holds the schema lock)."""
    from alembic import command

    cfg = _alembic_config()
    with _MIGRATING, engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, HEAD)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    """Foreign keys on; WAL so readers never block the writer and a killed writer loses only its open tick."""
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA foreign_keys=ON")
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _check_sqlite_store(path: Path) -> None:
    """Refuse, without writing to it, a file that is not a SQLite database holding a store's runs table."""
    try:
        with path.open("rb") as f:
            header = f.read(16)
    except OSError as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc.strerror}") from None
    if not header:
        raise UsageError(f"no store at {str(path)!r}: the file is empty (`societas run` creates a store)")
    if header != b"SQLite format 3\x00":
        raise UsageError(f"{str(path)!r} is not a SQLite database")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=60)
        try:
            found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs'").fetchone()
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise UsageError(f"cannot open database {str(path)!r}: {exc}") from None
    if found is None:
        raise UsageError(f"no store at {str(path)!r}: the database holds no runs (`societas run` creates a store)")


def _engine(url: str) -> Engine:
    """An engine for `url`: JSON written by the store's encoder; SQLite with its pragmas on every connection."""
    kwargs: dict[str, Any] = {"json_serializer": dumps}
    if url.startswith("sqlite"):
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": 60}
    engine = create_engine(url, **kwargs)
    if url.startswith("sqlite"):
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def upgrade(url: str) -> str:
    """`societas db upgrade`: migrate the store at `url` to the newest schema (a missing SQLite file is refused,
    never created); returns what was done, in words."""
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise UsageError(f"no store at {str(path)!r}: nothing to upgrade")
    with _refused_as_usage(url, "upgrade"):
        engine = _engine(url)
        done = prepare_schema(engine, path, upgrade=True)
        engine.dispose()
    return {"current": "already at the newest schema", "created": "schema created"}.get(done, done)
