"""What a run starts from and who takes part: `runs.initial` (the scenario's initial state that its events do not
carry, e.g. the seeded follow graph) and `run_agents` (one row per agent that ever took part: its role, policy,
strategy, persona, the tick it joined, and any profile data its scenario adds). Runs stored before have neither;
the app then falls back to what the agent steps and events show. And an index of events by (run, kind).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("initial", sa.JSON()))
    op.create_table(
        "run_agents",
        sa.Column("run_id", sa.String(), sa.ForeignKey("runs.id"), primary_key=True),
        sa.Column("agent_id", sa.Integer(), primary_key=True),
        sa.Column("joined", sa.Integer(), nullable=False),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("policy", sa.String()),
        sa.Column("strategy", sa.String()),
        sa.Column("persona", sa.Text()),
        sa.Column("profile", sa.JSON()),
    )
    # the pages' event filters (follows of the network, norm events, a kind in the event log) go by run and kind
    op.create_index("ix_events_run_id_kind", "events", ["run_id", "kind"])


def downgrade() -> None:
    op.drop_index("ix_events_run_id_kind", table_name="events")
    op.drop_table("run_agents")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("initial")
