"""Tool use in chats (issue 24): messages.tool_json holds an assistant turn's tool calls
({"calls": [{id, name, arguments}]}) or, on a "tool" message, what it answers ({"result":
{call_id, name, is_error, denied, duration_s, cut_chars}}); the result's text is the content.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("tool_json", sa.Text))


def downgrade() -> None:
    op.execute("ALTER TABLE messages DROP COLUMN tool_json")
