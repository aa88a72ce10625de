"""`chorus backup`: a consistent copy of a chat database that is open and being written."""

from __future__ import annotations

import sqlite3

import pytest

from app.chats.store import open_chat_store
from app.cli.main import main
from storage import ChatRepository, DocumentRepository, open_database
from storage.backup import backup_database
from storage.database import head_revision
from storage.errors import StorageError
from tests.support.documents import new_document


def test_backup_of_an_open_database_holds_commits_still_in_the_wal(tmp_path, capsys) -> None:
    db, repo = open_chat_store(tmp_path)
    try:
        conv = repo.create_conversation(model_ref="m.gguf")
        repo.add_message(conv.id, "user", "keep me safe")
        wal = tmp_path / "chorus.db-wal"
        assert wal.exists() and wal.stat().st_size > 0  # the commits are (still) in the WAL
        assert main(["--data-dir", str(tmp_path), "backup", str(tmp_path / "copy.db")]) == 0
    finally:
        db.close()
    assert "backed up" in capsys.readouterr().out
    copy = open_database(tmp_path / "copy.db")
    try:
        assert copy.current_revision() == head_revision()
        assert copy.backup_path is None  # opened at head: no migration, no safety copy
        messages = ChatRepository(copy).active_path(conv.id).messages
        assert [m.content for m in messages] == ["keep me safe"]
    finally:
        copy.close()


def test_a_folder_gets_a_dated_file_and_nothing_is_overwritten(tmp_path, capsys) -> None:
    db, _repo = open_chat_store(tmp_path)
    db.close()
    backups = tmp_path / "backups"
    backups.mkdir()
    assert main(["--data-dir", str(tmp_path), "backup", str(backups)]) == 0
    [made] = list(backups.iterdir())
    assert made.name.startswith("chorus-") and made.suffix == ".db"
    with sqlite3.connect(made) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert main(["--data-dir", str(tmp_path), "backup", str(made)]) == 2
    assert "already exists" in capsys.readouterr().err


def test_no_database_is_a_one_line_error_and_creates_nothing(tmp_path, capsys) -> None:
    assert main(["--data-dir", str(tmp_path), "backup", str(tmp_path / "copy.db")]) == 2
    assert "no chat database" in capsys.readouterr().err
    assert not (tmp_path / "chorus.db").exists() and not (tmp_path / "copy.db").exists()


def test_a_damaged_source_leaves_no_backup_file(tmp_path) -> None:
    source = tmp_path / "chorus.db"
    source.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StorageError, match="could not back up chorus.db"):
        backup_database(source, tmp_path / "copy.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chorus.db"]


def test_a_backup_holds_the_documents_and_their_search_index(tmp_path) -> None:
    db, repo = open_chat_store(tmp_path)
    manual = new_document("Descale the kettle monthly.\n\nThe warranty lasts two years.", "kettle.pdf")
    try:
        conv = repo.create_conversation()
        message = repo.add_message(conv.id, "user", "read this", documents=[manual])
        backup_database(tmp_path / "chorus.db", tmp_path / "copy.db")
    finally:
        db.close()
    copy = open_database(tmp_path / "copy.db")
    try:
        (attached,) = ChatRepository(copy).active_path(conv.id).attachments[message.id]
        assert (attached.name, attached.sha256) == ("kettle.pdf", manual.sha256)
        docs = DocumentRepository(copy)
        assert docs.document(manual.sha256).text == manual.text
        assert [h.index for h in docs.best_chunks([manual.sha256], "how long is the warranty?", 3)] == [1]
    finally:
        copy.close()
