"""Stored replies of the server's Responses API (POST /v1/responses with store).

One row a response: its id ("resp_..."), when, the model, the request's input as chat
messages (JSON), the output text, the response it continued, its status (completed, or
incomplete: cut at its max_output_tokens) and its usage (JSON). Chats are untouched.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "responses",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("input_json", sa.Text, nullable=False),
        sa.Column("output_text", sa.Text, nullable=False),
        sa.Column("previous_response_id", sa.String(64)),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("usage_json", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("responses")
