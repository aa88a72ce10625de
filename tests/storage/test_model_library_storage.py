"""The model library's storage: migration 0005 on a 0004 database with data, and the
LibraryRepository on a real SQLite file."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import pytest

from storage import Database, LibraryRepository, NotFoundError, StorageError, open_database
from storage.database import head_revision
from storage.schema import ModelProfile

T0 = "2024-03-01 09:00:00.000000"


def make_0004_database(path) -> None:
    """A database as revision 0004 left it, with profiles of both kinds and a chat."""
    db = Database(path)
    db.upgrade("0004")
    db.close()
    with sqlite3.connect(path) as conn:
        conn.executescript(
            f"""
            INSERT INTO model_profiles (id, name, kind, path, size_bytes, sha256, architecture,
                    context_length, base_url, remote_model, load_settings_json, created_at)
                VALUES (1, 'tiny', 'gguf', '/models/tiny.gguf', 1234, NULL, 'llama', 2048, NULL, NULL,
                        '{{"n_ctx": 1024}}', '{T0}'),
                       (2, 'api', 'remote', NULL, NULL, NULL, NULL, NULL, 'http://h/v1', 'gpt', '{{}}', '{T0}');
            INSERT INTO conversations (id, title, created_at, updated_at, model_ref, preset_id, comparison_id,
                    sampling_json, pinned, archived, active_message_id, deleted_at, title_provisional)
                VALUES (1, 'Kept', '{T0}', '{T0}', 'tiny.gguf', NULL, NULL, '{{}}', 0, 0, NULL, NULL, 0);
            """
        )


def test_0004_database_upgrades_with_profiles_intact(tmp_path):
    path = tmp_path / "chorus.db"
    make_0004_database(path)
    db = open_database(path)
    try:
        assert db.current_revision() == head_revision()  # every migration since 0004 ran
        assert db.backup_path is not None and db.backup_path.name.startswith("chorus.db.bak-0004-")
        tiny = LibraryRepository(db).by_name("tiny")
        # an old GGUF profile is a local file of the library, with its settings; a remote one has no source
        assert (tiny.source, tiny.hub_repo, tiny.last_used_at) == ("local", None, None)
        assert (tiny.path, tiny.size_bytes, tiny.load_settings) == ("/models/tiny.gguf", 1234, {"n_ctx": 1024})
        with sqlite3.connect(path) as conn:
            api = conn.execute("SELECT source, base_url FROM model_profiles WHERE name = 'api'").fetchall()
        assert api == [(None, "http://h/v1")]
        assert [r.name for r in LibraryRepository(db).records()] == ["tiny"]
        assert LibraryRepository(db).by_path("/models/tiny.gguf").id == 1
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT title FROM conversations").fetchall() == [("Kept",)]
    finally:
        db.close()


@pytest.fixture
def library(tmp_path):
    db = open_database(tmp_path / "chorus.db")
    yield LibraryRepository(db)
    db.close()


def test_record_then_find_by_name_and_path(library):
    rec = library.record("q.gguf", "/m/q.gguf", "hub", hub_repo="org/q-GGUF", sha256="ab" * 32, size_bytes=10)
    assert (rec.name, rec.kind, rec.source, rec.hub_repo, rec.size_bytes) == ("q.gguf", "gguf", "hub", "org/q-GGUF", 10)
    assert library.by_name("q.gguf").path == "/m/q.gguf"
    assert library.by_path("/m/q.gguf").name == "q.gguf"
    assert library.by_path("/m/other.gguf") is None and library.by_name("other") is None


def test_recording_the_same_path_again_keeps_defaults_and_last_use(library):
    library.record("q.gguf", "/m/q.gguf", "hub", hub_repo="org/q-GGUF")
    library.set_load_settings("q.gguf", {"n_ctx": 2048})
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    assert library.touch("/m/q.gguf", when)
    again = library.record("renamed", "/m/q.gguf", "hub", sha256="cd" * 32)
    assert (again.name, again.hub_repo, again.load_settings, again.last_used_at) == (
        "q.gguf", "org/q-GGUF", {"n_ctx": 2048}, when)
    assert len(library.records()) == 1


def test_a_taken_name_or_bad_source_is_refused(library):
    library.record("q.gguf", "/a/q.gguf", "local")
    with pytest.raises(StorageError, match="already in the library"):
        library.record("q.gguf", "/b/q.gguf", "local")
    with pytest.raises(StorageError, match="source"):
        library.record("x", "/x.gguf", "ftp")
    with library.db.begin() as s:  # a remote profile, as databases before revision 0005 hold them
        s.add(ModelProfile(name="api", kind="remote", base_url="http://h/v1", load_settings_json="{}"))
    with pytest.raises(StorageError, match="already in the library"):  # a remote profile's name too
        library.record("api", "/api.gguf", "local")
    assert [r.path for r in library.records()] == ["/a/q.gguf"]


def test_touch_settings_and_delete_of_unknown_models(library):
    assert library.touch("/nowhere.gguf") is False
    with pytest.raises(NotFoundError):
        library.set_load_settings("nothing", {})
    assert library.delete("nothing") is False
    library.record("q.gguf", "/m/q.gguf", "local")
    assert library.delete("q.gguf") is True
    assert library.records() == []
