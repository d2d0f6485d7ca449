"""Rewards you can learn from: each agent step's reward vector (named components), and each LLM call's
completion as token ids with their log-probabilities (for trajectories). Both nullable: rows stored
before them keep NULL, and a run made under an older decision contract records none.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("agent_steps") as batch:
        batch.add_column(sa.Column("components", sa.JSON()))
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("completion_ids", sa.JSON()))
        batch.add_column(sa.Column("logprobs", sa.JSON()))


def downgrade() -> None:
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("logprobs")
        batch.drop_column("completion_ids")
    with op.batch_alter_table("agent_steps") as batch:
        batch.drop_column("components")
