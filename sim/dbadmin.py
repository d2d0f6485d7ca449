"""`societas db upgrade`: migrate a store's schema to the head revision (Alembic)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.exc import ArgumentError, NoSuchModuleError, SQLAlchemyError

from sim.errors import UsageError
from sim.store import _sqlite_pragmas, dumps, prepare_schema, sqlite_path


def upgrade(url: str) -> str:
    """Upgrade (or create nothing: a missing SQLite file is refused); returns what was done."""
    path = sqlite_path(url)
    if path is not None and not path.is_file():
        raise UsageError(f"no store at {str(path)!r}: nothing to upgrade")
    try:
        kwargs: dict[str, Any] = {"json_serializer": dumps}
        if url.startswith("sqlite"):
            kwargs["connect_args"] = {"timeout": 60}
        engine = create_engine(url, **kwargs)
        if url.startswith("sqlite"):
            event.listen(engine, "connect", _sqlite_pragmas)
        done = prepare_schema(engine, path, upgrade=True)
        engine.dispose()
    except UsageError:
        raise
    except (ArgumentError, NoSuchModuleError, ImportError) as exc:
        raise UsageError(f"cannot open database {url!r}: {str(exc).splitlines()[0]}") from None
    except SQLAlchemyError as exc:
        raise UsageError(f"cannot upgrade database {url!r}: {str(getattr(exc, 'orig', exc)).splitlines()[0]}") from None
    return {"current": "already at the newest schema", "created": "schema created"}.get(done, done)
