"""Images attached to messages (issue 36): an image is a kind of document, stored once under
the sha256 of its bytes and attached like one, its bytes in the new `data` column (its text
empty, no chunks). Attaching, copying on a branch, deleting with the last message, backup,
export and import are then the documents' own. Existing rows get NULL: documents keep no
bytes.

Revision ID: 0011
Revises: 0010
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("documents", sa.Column("data", sa.LargeBinary, nullable=True))


def downgrade() -> None:
    # SQLite's own DROP COLUMN (3.35+): a batch copy of the table would trip the attachments'
    # foreign keys when documents are stored.
    op.execute("ALTER TABLE documents DROP COLUMN data")
