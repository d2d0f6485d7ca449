"""Which database a command means: the default store and bare file paths as SQLite URLs.

Plain strings (no database library), so that the CLI can name its default store in `--help`.
"""

from __future__ import annotations

import os
from typing import Optional

#: where runs are stored when no --db, db= or $SOCIETAS_DB says otherwise: runs.db in the current directory
DEFAULT_URL = "sqlite:///runs.db"


def default_url(url: Optional[str] = None) -> str:
    """The store URL: `url`, else $SOCIETAS_DB, else runs.db in the current directory (the CLI, the API, the app)."""
    return as_url(url or os.environ.get("SOCIETAS_DB") or DEFAULT_URL)


def as_url(url: str) -> str:
    """A database URL; a bare file path (`runs.db`, `/data/study.db`: no `scheme://`) is a SQLite file."""
    return url if "://" in url or url.startswith("sqlite:") else "sqlite:///" + os.path.expanduser(url)
