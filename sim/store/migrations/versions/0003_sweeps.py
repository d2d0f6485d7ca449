"""Sweeps: a grid of configs x seeds run as one unit; its definition and size, so its progress is known.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("scenario", sa.String(), nullable=False),
        sa.Column("definition", sa.JSON()),
        sa.Column("total", sa.Integer(), nullable=False),
        sa.Column("source", sa.String()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime()),
    )


def downgrade() -> None:
    op.drop_table("sweeps")
