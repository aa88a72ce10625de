"""Documents attached to messages: stored once by sha256, cut into chunks for retrieval.

documents holds a file's extracted text under the sha256 of its bytes (the same file in
many chats is one row); document_chunks the spans of that text that retrieval returns;
document_chunks_fts their words for bm25 (FTS5). A chunk's text is documents.text[start:end],
so the FTS table stores the slice itself (triggers copy it in and take it out); no column of
document_chunks holds it twice. message_attachments links messages to documents, and
messages.sources_json keeps the excerpts a reply was shown.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

TOKENIZER = "unicode61 remove_diacritics 2"  # as 0002's: the same words match in chats and files

_FTS = [
    f"CREATE VIRTUAL TABLE document_chunks_fts USING fts5(text, tokenize='{TOKENIZER}')",
    # SQLite's substr counts characters from 1, as Python's slices count code points from 0.
    "CREATE TRIGGER document_chunks_fts_ai AFTER INSERT ON document_chunks BEGIN "
    "INSERT INTO document_chunks_fts(rowid, text) "
    'SELECT new.id, substr(d.text, new.start + 1, new."end" - new.start) '
    "FROM documents d WHERE d.sha256 = new.sha256; END",
    "CREATE TRIGGER document_chunks_fts_ad AFTER DELETE ON document_chunks BEGIN "
    "DELETE FROM document_chunks_fts WHERE rowid = old.id; END",
]


def upgrade() -> None:
    op.create_table(
        "documents",
        sa.Column("sha256", sa.String(64), primary_key=True),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("mime", sa.String(200), nullable=False),
        sa.Column("size_bytes", sa.Integer, nullable=False),
        sa.Column("pages", sa.Integer),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "document_chunks",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("sha256", sa.String(64), sa.ForeignKey("documents.sha256", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("idx", sa.Integer, nullable=False),
        sa.Column("start", sa.Integer, nullable=False),
        sa.Column("end", sa.Integer, nullable=False),
        sa.Column("page", sa.Integer),
        sa.Column("heading", sa.Text, nullable=False),
        sa.UniqueConstraint("sha256", "idx", name="uq_document_chunks_sha256_idx"),
    )
    op.create_table(
        "message_attachments",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("message_id", sa.Integer, sa.ForeignKey("messages.id", ondelete="CASCADE"),
                  nullable=False),
        sa.Column("sha256", sa.String(64), sa.ForeignKey("documents.sha256"), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
    )
    op.create_index("ix_message_attachments_message_id", "message_attachments", ["message_id"])
    op.create_index("ix_message_attachments_sha256", "message_attachments", ["sha256"])
    # A plain ADD COLUMN: a batch rebuild of messages would drop 0002's search triggers.
    op.add_column("messages", sa.Column("sources_json", sa.Text))
    for statement in _FTS:
        op.execute(statement)


def downgrade() -> None:
    # SQLite's own DROP COLUMN (3.35+), for the same reason as the plain ADD COLUMN above.
    op.execute("ALTER TABLE messages DROP COLUMN sources_json")
    for trigger in ("document_chunks_fts_ai", "document_chunks_fts_ad"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    op.execute("DROP TABLE IF EXISTS document_chunks_fts")
    op.drop_index("ix_message_attachments_sha256", "message_attachments")
    op.drop_index("ix_message_attachments_message_id", "message_attachments")
    op.drop_table("message_attachments")
    op.drop_table("document_chunks")
    op.drop_table("documents")
