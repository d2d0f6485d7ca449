"""Bulk inserts into the store's big tables (a tick's agent steps, events and LLM calls; the agents that join): the
fastest way each database takes many rows, the same rows whichever way is taken.

- PostgreSQL through psycopg: `COPY ... FROM STDIN` (psycopg's copy API): one stream, no statement per row;
- SQLite: multi-row `INSERT ... VALUES (...), (...)`, as many rows a statement as its limit on bound values allows;
- any other database or driver: the driver's executemany.

At 100,000 agent steps a tick, a tick's commit through COPY costs PostgreSQL and the client together
under a third of the CPU it costs through executemany, and through SQLite's multi-row statements about 80% of
it (the INSERTs alone: ~55%) (`benchmarks/store_scale.py`). Rows go in in the order given, so ids (and every read ordered by them)
come out as they would one by one. Everything runs on the caller's connection, inside its
transaction: a tick is still one commit.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Optional

from sqlalchemy import JSON, Table
from sqlalchemy.engine import Connection, Dialect

#: rows in one SQLite statement at most (more saves nothing measurable and makes longer statements to parse)
SQLITE_ROWS = 1000


def insert_rows(conn: Connection, table: Table, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Insert `rows` into `table`: tuples of values for `columns` as the driver takes them (JSON already encoded:
    `driver_rows`), in order, inside `conn`'s transaction."""
    if not rows:
        return
    dialect = conn.dialect
    names = _names(dialect, table, tuple(columns))
    how = way(dialect)
    if how == "copy":
        _copy(conn, names, rows)
    elif how == "multi-row":
        _multi_row(conn, names, len(columns), rows)
    else:
        marks = ", ".join([_mark(dialect)] * len(columns))
        conn.exec_driver_sql(f"INSERT INTO {names} VALUES ({marks})", list(map(tuple, rows)))


@functools.lru_cache(maxsize=256)
def _names(dialect: Dialect, table: Table, columns: tuple[str, ...]) -> str:
    """`table (col, ...)` quoted for the dialect, built once per table and engine (quoting a call row's 18 columns
    cost every tick ~6 us)."""
    quote = dialect.identifier_preparer.quote
    return f"{quote(table.name)} ({', '.join(quote(c) for c in columns)})"


def way(dialect: Dialect) -> str:
    """How rows go into this database: `copy` (PostgreSQL through psycopg), `multi-row` (SQLite) or `executemany`."""
    if dialect.name == "postgresql" and dialect.driver == "psycopg":
        return "copy"
    return "multi-row" if dialect.name == "sqlite" else "executemany"


def driver_rows(dialect: Dialect, table: Table, columns: Sequence[str], rows: Iterable[Mapping[str, Any]],
                encode: Callable[[Any], str]) -> list[tuple]:
    """Mappings of column values as tuples for `insert_rows`, each value as SQLAlchemy's `insert()` sends it: a JSON
    column's value encoded by `encode` (the store's encoder, the engine's serializer; None as JSON null, since
    the store's JSON columns do not take None as NULL), every other column through its type's bind processor."""
    pairs = _converters(dialect, table, tuple(columns), encode)
    if pairs is None:
        return [tuple(row[name] for name in columns) for row in rows]
    return [tuple(row[name] if c is None else c(row[name]) for name, c in pairs) for row in rows]


@functools.lru_cache(maxsize=256)
def _converters(dialect: Dialect, table: Table, columns: tuple[str, ...], encode: Callable[[Any], str]
                ) -> Optional[tuple[tuple[str, Optional[Callable[[Any], Any]]], ...]]:
    """Each column with its converter (None: none needed by any column), built once per table and engine: a tick
    writes every table, so building them per call cost every run ~0.1 ms a table a tick."""
    convert = [_converter(table.c[name], dialect, encode) for name in columns]
    if all(c is None for c in convert):
        return None
    return tuple(zip(columns, convert))


def _converter(column: Any, dialect: Dialect, encode: Callable[[Any], str]) -> Optional[Callable[[Any], Any]]:
    """How a value of `column` is handed to the driver (None: as it is)."""
    kind = column.type
    if isinstance(kind, JSON):
        if kind.none_as_null:
            return lambda v: None if v is None else encode(v)
        return encode
    return kind.dialect_impl(dialect).bind_processor(dialect)


def _copy(conn: Connection, names: str, rows: Sequence[Sequence[Any]]) -> None:
    """COPY the rows in through psycopg, on the transaction's own connection (text format: the server parses each
    value as its column's type, JSON text included)."""
    with conn.connection.driver_connection.cursor() as cur:
        with cur.copy(f"COPY {names} FROM STDIN") as copy:
            write = copy.write_row
            for row in rows:
                write(row)


def _multi_row(conn: Connection, names: str, width: int, rows: Sequence[Sequence[Any]]) -> None:
    """Multi-row INSERTs: as many rows a statement as SQLite binds values for (at most SQLITE_ROWS); the statement
    of a full chunk is prepared once and reused (the driver's statement cache)."""
    raw = conn.connection.driver_connection
    per = max(1, min(SQLITE_ROWS, raw.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width))
    one = "(" + ", ".join(["?"] * width) + ")"
    cursor = raw.cursor()
    try:
        sql: dict[int, str] = {}
        for start in range(0, len(rows), per):
            chunk = rows[start:start + per]
            statement = sql.get(len(chunk))
            if statement is None:
                statement = sql[len(chunk)] = f"INSERT INTO {names} VALUES " + ", ".join([one] * len(chunk))
            cursor.execute(statement, list(itertools.chain.from_iterable(chunk)))
    finally:
        cursor.close()


def _mark(dialect: Dialect) -> str:
    """The driver's positional parameter mark (the store runs on drivers of the qmark and format styles)."""
    return "?" if dialect.paramstyle == "qmark" else "%s"
