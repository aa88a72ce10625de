"""A document's chunks go into the search index from Python, not from 0007's trigger.

The trigger read each new chunk's text as substr(documents.text, ...): SQLite loads the
whole document (and counts its characters from the start) for every chunk, so storing a
document cost its size times its chunks — minutes for a 50 MB text file. The slices are
now written by storage/attachments.py, which holds the text already. The delete trigger
stays.

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS document_chunks_fts_ai")


def downgrade() -> None:
    op.execute(
        "CREATE TRIGGER document_chunks_fts_ai AFTER INSERT ON document_chunks BEGIN "
        "INSERT INTO document_chunks_fts(rowid, text) "
        'SELECT new.id, substr(d.text, new.start + 1, new."end" - new.start) '
        "FROM documents d WHERE d.sha256 = new.sha256; END"
    )
