"""Background jobs (issue 37): a job (a prompt template over an input file, or an OpenAI
batch) and its items, each item's result written once as it finishes. Chats are untouched.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("spec_json", sa.Text, nullable=False),
        sa.Column("source", sa.Text, nullable=False),
    )
    op.create_table(
        "job_items",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("job_id", sa.String(64), sa.ForeignKey("jobs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("custom_id", sa.Text),
        sa.Column("input_json", sa.Text, nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("answer", sa.Text),
        sa.Column("error", sa.Text),
        sa.Column("finish_reason", sa.String(32)),
        sa.Column("prompt_tokens", sa.Integer, nullable=False),
        sa.Column("completion_tokens", sa.Integer, nullable=False),
        sa.Column("seconds", sa.Float, nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("job_id", "seq"),
    )
    op.create_index("ix_job_items_job_state", "job_items", ["job_id", "state"])


def downgrade() -> None:
    op.drop_table("job_items")
    op.drop_table("jobs")
