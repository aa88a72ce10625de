"""Full-text search over message text and conversation titles (SQLite FTS5).

External-content FTS tables kept in sync by triggers; existing rows are indexed here.

Revision ID: 0002
Revises: 0001
"""

from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TOKENIZER = "unicode61 remove_diacritics 2"


def _fts(table: str, column: str) -> list[str]:
    fts = f"{table}_fts"
    return [
        f"CREATE VIRTUAL TABLE {fts} USING fts5({column}, content='{table}', "
        f"content_rowid='id', tokenize='{TOKENIZER}')",
        f"CREATE TRIGGER {fts}_ai AFTER INSERT ON {table} BEGIN "
        f"INSERT INTO {fts}(rowid, {column}) VALUES (new.id, new.{column}); END",
        f"CREATE TRIGGER {fts}_ad AFTER DELETE ON {table} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {column}) VALUES ('delete', old.id, old.{column}); END",
        f"CREATE TRIGGER {fts}_au AFTER UPDATE OF {column} ON {table} BEGIN "
        f"INSERT INTO {fts}({fts}, rowid, {column}) VALUES ('delete', old.id, old.{column}); "
        f"INSERT INTO {fts}(rowid, {column}) VALUES (new.id, new.{column}); END",
        f"INSERT INTO {fts}({fts}) VALUES ('rebuild')",
    ]


def upgrade() -> None:
    for statement in _fts("messages", "content") + _fts("conversations", "title"):
        op.execute(statement)


def downgrade() -> None:
    for fts in ("messages_fts", "conversations_fts"):
        for suffix in ("ai", "ad", "au"):
            op.execute(f"DROP TRIGGER IF EXISTS {fts}_{suffix}")
        op.execute(f"DROP TABLE IF EXISTS {fts}")
