"""Runs know who runs them and where they came from: owner pid/host and heartbeat (stale runs),
origin (run / replay / resume / fork), parent and branch tick (forks, replays), sweep id, the
backends that decided, whether every LLM call was a cache hit; agent_steps indexed by (run, tick).

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("origin", sa.String(), nullable=False, server_default="run"))
        batch.add_column(sa.Column("parent_id", sa.String()))
        batch.add_column(sa.Column("branch_tick", sa.Integer()))
        batch.add_column(sa.Column("sweep_id", sa.String()))
        batch.add_column(sa.Column("backends", sa.String(), nullable=False, server_default=""))
        batch.add_column(sa.Column("cached", sa.Boolean()))
        batch.add_column(sa.Column("owner_pid", sa.Integer()))
        batch.add_column(sa.Column("owner_host", sa.String()))
        batch.add_column(sa.Column("heartbeat_at", sa.DateTime()))
        batch.create_index("ix_runs_parent_id", ["parent_id"])
        batch.create_index("ix_runs_sweep_id", ["sweep_id"])
    # (run, tick) serves every per-run query; the run-only indexes it replaces cost bytes on every row
    op.drop_index("ix_agent_steps_run_id", "agent_steps")
    op.create_index("ix_agent_steps_run_id_tick", "agent_steps", ["run_id", "tick"])
    op.drop_index("ix_events_run_id", "events")
    op.create_index("ix_events_run_id_tick", "events", ["run_id", "tick"])


def downgrade() -> None:
    op.drop_index("ix_events_run_id_tick", "events")
    op.create_index("ix_events_run_id", "events", ["run_id"])
    op.drop_index("ix_agent_steps_run_id_tick", "agent_steps")
    op.create_index("ix_agent_steps_run_id", "agent_steps", ["run_id"])
    with op.batch_alter_table("runs") as batch:
        batch.drop_index("ix_runs_sweep_id")
        batch.drop_index("ix_runs_parent_id")
        for col in ("heartbeat_at", "owner_host", "owner_pid", "cached", "backends", "sweep_id", "branch_tick",
                    "parent_id", "origin"):
            batch.drop_column(col)
