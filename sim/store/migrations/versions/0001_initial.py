"""The first schema: runs, ticks, agent_steps, events, llm_calls.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

STR = sa.String()


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", STR, primary_key=True),
        sa.Column("scenario", STR, nullable=False),
        sa.Column("seed", sa.Integer(), nullable=False),
        sa.Column("policy", STR, nullable=False),
        sa.Column("spec_digest", STR, nullable=False),
        sa.Column("spec", sa.JSON()),
        sa.Column("status", STR, nullable=False),
        sa.Column("reason", STR),
        sa.Column("ticks", sa.Integer(), nullable=False),
        sa.Column("final_metrics", sa.JSON()),
        sa.Column("versions", sa.JSON()),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime()),
        sa.Column("duration_s", sa.Float(), nullable=False),
    )
    for col in ("scenario", "spec_digest", "status"):
        op.create_index(f"ix_runs_{col}", "runs", [col])
    op.create_table(
        "ticks",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", STR, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("tick", sa.Integer(), nullable=False),
        sa.Column("metrics", sa.JSON()),
        sa.Column("state", sa.JSON()),
        sa.Column("duration_s", sa.Float(), nullable=False),
    )
    op.create_index("ix_ticks_run_id", "ticks", ["run_id"])
    op.create_table(
        "agent_steps",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", STR, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("tick", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("backend", STR, nullable=False),
        sa.Column("action", sa.JSON()),
        sa.Column("payoff", sa.Float(), nullable=False),
        sa.Column("reward", sa.Float(), nullable=False),
        sa.Column("fallback", sa.Boolean(), nullable=False),
        sa.Column("reason", STR),
        sa.Column("memory", sa.JSON()),
    )
    op.create_index("ix_agent_steps_run_id", "agent_steps", ["run_id"])
    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", STR, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("tick", sa.Integer(), nullable=False),
        sa.Column("kind", STR, nullable=False),
        sa.Column("actor", sa.Integer()),
        sa.Column("target", sa.Integer()),
        sa.Column("data", sa.JSON()),
    )
    op.create_index("ix_events_run_id", "events", ["run_id"])
    op.create_index("ix_events_kind", "events", ["kind"])
    op.create_table(
        "llm_calls",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", STR, sa.ForeignKey("runs.id"), nullable=False),
        sa.Column("key", STR, nullable=False),
        sa.Column("tick", sa.Integer(), nullable=False),
        sa.Column("agent_id", sa.Integer(), nullable=False),
        sa.Column("phase", STR, nullable=False),
        sa.Column("backend", STR, nullable=False),
        sa.Column("model_id", STR, nullable=False),
        sa.Column("prompt", sa.Text()),
        sa.Column("answer", sa.Text()),
        sa.Column("value", sa.JSON()),
        sa.Column("tokens_in", sa.Integer(), nullable=False),
        sa.Column("tokens_out", sa.Integer(), nullable=False),
        sa.Column("latency_s", sa.Float(), nullable=False),
        sa.Column("cache_hit", sa.Boolean(), nullable=False),
        sa.Column("fallback", sa.Boolean(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
    )
    op.create_index("ix_llm_calls_run_id", "llm_calls", ["run_id"])
    op.create_index("ix_llm_calls_key", "llm_calls", ["key"])


def downgrade() -> None:
    for table in ("llm_calls", "events", "agent_steps", "ticks", "runs"):
        op.drop_table(table)
