"""A job's item that may call tools (issue 37) keeps its exchange: the model's turns with
their calls and the tools' results, in OpenAI's message shape, beside its final answer.
Existing rows get NULL: an item without tools has none.

Revision ID: 0012
Revises: 0011
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("job_items", sa.Column("exchange_json", sa.Text, nullable=True))


def downgrade() -> None:
    op.execute("ALTER TABLE job_items DROP COLUMN exchange_json")
