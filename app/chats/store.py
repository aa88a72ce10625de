"""Opening the chat database of a data folder, as every command does at start-up."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from storage import DEFAULT_FILENAME, ChatRepository, Database, open_database

# Soft-deleted conversations stay restorable this long, across restarts too.
PURGE_AFTER = timedelta(days=1)


def open_chat_store(data_dir: Path) -> tuple[Database, ChatRepository]:
    db = open_database(data_dir / DEFAULT_FILENAME)
    repo = ChatRepository(db)
    repo.recover_interrupted()
    repo.purge_deleted(deleted_before=datetime.now(timezone.utc) - PURGE_AFTER)
    return db, repo
