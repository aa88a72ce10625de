"""Mark a chat title the app may still replace by a generated one.

A title taken from the first message is provisional until the model's title (or the
user's) replaces it. Existing chats keep their titles: none is provisional.

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
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("title_provisional", sa.Boolean, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("conversations") as batch:
        batch.drop_column("title_provisional")
