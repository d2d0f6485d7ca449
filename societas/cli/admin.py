"""`societas db ...`: store administration."""

from __future__ import annotations

from typing import Optional

import typer

from sim.store.urls import default_url
from societas.cli.app import DbOption, app, out

db_app = typer.Typer(no_args_is_help=True, help="Store administration.")
app.add_typer(db_app, name="db")


@db_app.command("upgrade")
def db_upgrade(db: Optional[str] = DbOption) -> None:
    """Migrate the store's schema to the version this societas needs (Alembic)."""
    from sim.store.schema import upgrade

    url = default_url(db)
    out.print(f"{url}: {upgrade(url)}", soft_wrap=True, highlight=False)
