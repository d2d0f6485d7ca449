"""Reward vectors packed per tick: `reward_vectors` holds one row per tick with every agent step's vector in one
compressed binary value (sim.store.vectors), instead of a JSON object in each `agent_steps` row (~130 bytes a step,
more than the rest of the row). Runs stored before keep their vectors in `agent_steps.components`, read as before.
On SQLite `run_agents` becomes a WITHOUT ROWID table (its small rows kept in its key's order, no second index for
the key: ~30 bytes less an agent); `reward_vectors` keeps a rowid (its rows are large).
A downgrade writes the packed vectors back into `agent_steps.components` before it drops the table.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

from sim.store.vectors import read_vectors

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reward_vectors",
        sa.Column("run_id", sa.String(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("tick", sa.Integer(), primary_key=True),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )
    if op.get_bind().dialect.name == "sqlite":  # run_agents' rows kept in its key's order (no second index)
        with op.batch_alter_table("run_agents", recreate="always", table_kwargs={"sqlite_with_rowid": False}):
            pass


def downgrade() -> None:
    conn = op.get_bind()
    steps = sa.table("agent_steps", sa.column("run_id"), sa.column("tick"), sa.column("agent_id"),
                     sa.column("components", sa.JSON()))
    write = (steps.update()
             .where(steps.c.run_id == sa.bindparam("r"), steps.c.tick == sa.bindparam("t"), steps.c.agent_id == sa.bindparam("a"))
             .values(components=sa.bindparam("c", type_=sa.JSON())))
    packed = conn.execute(sa.text("SELECT run_id, tick, data FROM reward_vectors ORDER BY run_id, tick")).fetchall()
    for run_id, tick, data in packed:
        rows = [{"c": vec, "r": run_id, "t": tick, "a": aid} for aid, vec in read_vectors(data).items()]
        if rows:
            conn.execute(write, rows)
    op.drop_table("reward_vectors")
    if conn.dialect.name == "sqlite":
        with op.batch_alter_table("run_agents", recreate="always", table_kwargs={"sqlite_with_rowid": True}):
            pass
