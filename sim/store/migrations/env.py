"""Alembic environment: migrations run on the connection the Store hands over (no alembic.ini needed)."""

from alembic import context
from sqlmodel import SQLModel

import sim.store.tables  # noqa: F401 - registers the tables on SQLModel.metadata

target_metadata = SQLModel.metadata
connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
