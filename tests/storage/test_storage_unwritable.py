"""A chat database that cannot be written (read-only, or on a full disk): one clear storage
error naming the file, never SQLAlchemy's traceback and its SQL; what can be read still is."""

from __future__ import annotations

import pytest

from storage import ChatRepository, DatabaseReadOnly, StorageError, open_database
from tests.support.filesystems import read_only_file


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "chorus.db"
    db = open_database(path)
    ChatRepository(db).create_conversation("owls")
    db.close()
    return path


def test_a_read_only_database_is_one_error_naming_it_and_still_reads(saved):
    """Issue 25: an OperationalError ("attempt to write a readonly database") with its SQL."""
    with read_only_file(saved):
        db = open_database(saved)
        try:
            repo = ChatRepository(db)
            assert [c.title for c in repo.list_conversations()] == ["owls"]
            with pytest.raises(DatabaseReadOnly):
                db.require_writable()  # asked before any write
            with pytest.raises(DatabaseReadOnly) as info:
                repo.create_conversation("more owls")
        finally:
            db.close()
    message = str(info.value)
    assert isinstance(info.value, StorageError) and "read-only" in message and str(saved) in message
    assert "\n" not in message and "INSERT" not in message


def test_a_writable_database_passes_the_check_unchanged(saved):
    db = open_database(saved)
    try:
        db.require_writable()
        assert [c.title for c in ChatRepository(db).list_conversations()] == ["owls"]
    finally:
        db.close()


def test_a_full_disk_is_one_error_saying_so_and_the_write_works_once_room_returns(tmp_path):
    """Issue 25: SQLite's "database or disk is full" came out as a 70-line SQLAlchemy
    traceback. On a real 4 MB tmpfs: a 2 MB message with 1 MB free."""
    from storage import DiskFull
    from tests.support.filesystems import fill, small_filesystem

    with small_filesystem(tmp_path / "disk", "4m") as disk:
        db = open_database(disk / "chorus.db")
        try:
            repo = ChatRepository(db)
            conv = repo.create_conversation("owls")
            ballast = fill(disk, leave=1 << 20)
            text = "owl " * (512 * 1024)
            with pytest.raises(DiskFull) as info:
                repo.add_message(conv.id, "user", text)
            message = str(info.value)
            assert isinstance(info.value, StorageError) and "the disk is full" in message
            assert str(disk / "chorus.db") in message and "\n" not in message and "INSERT" not in message
            ballast.unlink()  # room again: the same write goes through
            repo.add_message(conv.id, "user", text)
            assert [m.content for m in repo.active_path(conv.id).messages] == [text]
        finally:
            db.close()


def _one_line(error: Exception, *parts: str) -> str:
    message = str(error)
    assert isinstance(error, StorageError) and "\n" not in message and "SQL" not in message
    assert all(part in message for part in parts), message
    return message


def test_a_disk_with_8_kb_left_is_a_full_disk_when_the_database_opens(tmp_path):
    """Issue 39: SQLite could not grow the -shm file and said "disk I/O error", which came
    out as SQLAlchemy's traceback. On a real 1 MB tmpfs with 8 KB left."""
    from storage import DiskFull
    from tests.support.filesystems import fill, small_filesystem

    with small_filesystem(tmp_path / "disk", "1m") as disk:
        fill(disk, leave=8 * 1024)
        with pytest.raises(DiskFull) as info:
            open_database(disk / "data" / "chorus.db")
    _one_line(info.value, "the disk is full", str(disk / "data" / "chorus.db"))


@pytest.mark.parametrize("saved_before", [False, True], ids=["new", "existing"])
def test_a_folder_that_cannot_be_written_is_one_error_naming_the_database(tmp_path, saved_before):
    """Issue 39: "unable to open database file" (an existing database too: in WAL mode a
    reader makes the -shm file) or an OSError, each with its traceback."""
    from storage import DatabaseUnavailable
    from tests.support.filesystems import read_only_folder

    folder = tmp_path / "data"
    if saved_before:
        open_database(folder / "chorus.db").close()
    before = sorted(p.name for p in folder.iterdir()) if folder.exists() else []
    with read_only_folder(folder):
        with pytest.raises(DatabaseUnavailable) as info:
            open_database(folder / "chorus.db")
    _one_line(info.value, "the chat database cannot be opened", str(folder / "chorus.db"), "--data-dir")
    assert sorted(p.name for p in folder.iterdir()) == before  # nothing made, nothing removed
