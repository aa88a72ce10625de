"""A damaged chat database: left byte for byte as it is, and one clear message (what, where,
how to restore a backup) from the storage layer and from every command that opens it."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli.main import main
from storage import ChatRepository, DamagedDatabase, StorageError, open_database


@pytest.fixture(scope="module")
def healthy(tmp_path_factory) -> bytes:
    """The bytes of a real Chorus database with a few hundred pages of chats, all in the
    main file (WAL checkpointed), the starting point of every damage."""
    path = tmp_path_factory.mktemp("healthy") / "chorus.db"
    db = open_database(path)
    repo = ChatRepository(db)
    for i in range(200):
        conv = repo.create_conversation(f"chat {i}")
        repo.add_message(conv.id, "user", "hello owls " * 100)
    db.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.read_bytes()


def damage(kind: str, data: bytes) -> bytes:
    page = int.from_bytes(data[16:18], "big")
    return {
        "random bytes": os.urandom(len(data)),
        "truncated": data[: len(data) // 2],
        # Page 1 (the header and the schema) intact, every later page scrambled.
        "malformed pages": data[:page] + bytes(b ^ 0x5A for b in data[page:]),
        "header only": data[:100],
        "wrong magic": b"Not a database!\0" + data[16:],
    }[kind]


KINDS = ("random bytes", "truncated", "malformed pages", "header only", "wrong magic")


@pytest.fixture(params=KINDS)
def damaged(request, healthy, tmp_path) -> tuple[Path, bytes]:
    content = damage(request.param, healthy)
    path = tmp_path / "chorus.db"
    path.write_bytes(content)
    return path, content


def test_opening_raises_damaged_database_and_leaves_the_file(damaged):
    path, content = damaged
    with pytest.raises(DamagedDatabase) as caught:
        db = open_database(path)
        ChatRepository(db).list_conversations()  # the damage may only show on reading
    assert isinstance(caught.value, StorageError) and caught.value.path == path
    message = str(caught.value)
    assert "the chat database is damaged" in message and str(path) in message
    assert "chorus backup" in message and ".bak-" in message
    assert path.read_bytes() == content


@pytest.mark.parametrize("command", [("list",), ("export", "-"), ("import", "chats.json")])
def test_every_chats_command_prints_one_line_and_exits_2(damaged, command, capsys):
    path, content = damaged
    code = main(["--data-dir", str(path.parent), *command])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("chorus: the chat database is damaged: ")
    assert str(path) in err and "Traceback" not in err
    assert path.read_bytes() == content


def test_chorus_list_as_a_process_has_no_traceback(healthy, tmp_path):
    """Each kind of damage under a real `chorus list`: the five processes run side by side
    (each is mostly its ~1 s of imports; one after the other they were the slowest part of
    this module)."""
    runs = {}
    for kind in KINDS:
        path = tmp_path / kind.replace(" ", "-") / "chorus.db"
        path.parent.mkdir()
        path.write_bytes(damage(kind, healthy))
        runs[kind] = path, path.read_bytes(), subprocess.Popen(
            [sys.executable, "-m", "app", "--data-dir", str(path.parent), "list"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for kind, (path, content, proc) in runs.items():
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 2, (kind, err)
        assert "the chat database is damaged" in err and "Traceback" not in err, (kind, err)
        assert path.read_bytes() == content, kind


def test_damage_found_after_opening_raises_the_same_error(healthy, tmp_path):
    """A file damaged while open (or in a part opening never reads) fails its next query
    with the same message, not a SQLAlchemy traceback."""
    path = tmp_path / "chorus.db"
    path.write_bytes(healthy)
    db = open_database(path)
    repo = ChatRepository(db)
    assert len(repo.list_conversations()) == 200
    db.close()
    path.write_bytes(damage("malformed pages", healthy))
    with pytest.raises(DamagedDatabase, match="database disk image is malformed"):
        repo.list_conversations()


def test_an_empty_file_is_a_new_database(tmp_path):
    """Zero bytes is SQLite's empty database, not damage: it is created at head."""
    path = tmp_path / "chorus.db"
    path.write_bytes(b"")
    db = open_database(path)
    assert ChatRepository(db).list_conversations() == []
    db.close()
