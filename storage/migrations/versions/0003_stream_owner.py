"""Remember which process streams a message, so recovery spares a live writer.

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
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("owner_pid", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("owner_pid")
