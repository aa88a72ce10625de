"""Alembic environment: runs on the connection storage.database hands over."""

from alembic import context

from storage.schema import Base

FTS_TABLES = ("messages_fts", "conversations_fts", "document_chunks_fts")


def include_object(obj, name, type_, reflected, compare_to):
    # FTS5 virtual tables and their shadow tables are created by hand (0002, 0007).
    return not (type_ == "table" and name and name.startswith(FTS_TABLES))


connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=Base.metadata,
    render_as_batch=True,
    include_object=include_object,
)
with context.begin_transaction():
    context.run_migrations()
