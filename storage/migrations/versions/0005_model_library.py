"""The model library: where a GGUF model profile came from, and when it was last used.

model_profiles (0001) already holds a GGUF file's path, size, sha256 and load settings;
the library adds its source ("catalog", "hub" or "local"), the Hub repository it was
downloaded from, and the time it was last loaded. Existing GGUF profiles count as local
files; remote profiles have no source.

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
    with op.batch_alter_table("model_profiles") as batch:
        batch.add_column(sa.Column("source", sa.String(16)))
        batch.add_column(sa.Column("hub_repo", sa.Text))
        batch.add_column(sa.Column("last_used_at", sa.DateTime(timezone=True)))
        batch.create_index("ix_model_profiles_path", ["path"])
    op.execute("UPDATE model_profiles SET source = 'local' WHERE kind = 'gguf'")


def downgrade() -> None:
    with op.batch_alter_table("model_profiles") as batch:
        batch.drop_index("ix_model_profiles_path")
        batch.drop_column("last_used_at")
        batch.drop_column("hub_repo")
        batch.drop_column("source")
