"""The chat database, its -wal and -shm, its safety copies and backups are the user's alone
(issue 39: 0644 in 0755 folders, readable by every local user), whatever the umask."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from storage import ChatRepository, open_database
from storage.backup import backup_database

pytestmark = pytest.mark.usefixtures("usual_umask")  # 0022: what Chorus makes without asking is 0755/0644


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_database_its_wal_and_shm_and_the_folders_made_for_it_are_private(tmp_path):
    db = open_database(tmp_path / "data" / "chats" / "chorus.db")
    try:
        ChatRepository(db).create_conversation("owls")  # SQLite makes -wal and -shm
        folder = tmp_path / "data" / "chats"
        assert {p.name: oct(mode(p)) for p in folder.iterdir()} == {
            "chorus.db": "0o600", "chorus.db-wal": "0o600", "chorus.db-shm": "0o600"}
        assert mode(folder) == mode(folder.parent) == 0o700
    finally:
        db.close()


def test_the_safety_copy_and_a_backup_anywhere_are_private(tmp_path):
    db = open_database(tmp_path / "chorus.db")
    try:
        ChatRepository(db).create_conversation("owls")
        safety = db.backup("0007")  # what open_database makes before a migration
        shared = tmp_path / "shared"
        shared.mkdir()  # 0755: a backup is the chats, wherever it goes
        backup = backup_database(db.path, shared / "copy.db")
    finally:
        db.close()
    assert mode(safety) == mode(backup) == 0o600
    copy = open_database(backup)
    try:
        assert [c.title for c in ChatRepository(copy).list_conversations()] == ["owls"]
    finally:
        copy.close()
