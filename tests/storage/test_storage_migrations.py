"""Alembic migrations against the models, and upgrading an old database with its data."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from storage import ChatRepository, Database, MessageStatus, open_database, search
from storage.catalog import CatalogRepository
from storage.database import head_revision
from storage.schema import Base

FTS_PREFIXES = ("messages_fts", "conversations_fts", "document_chunks_fts")


def skip_fts(obj, name, type_, reflected, compare_to):
    return not (type_ == "table" and name and name.startswith(FTS_PREFIXES))


def schema_diff(db: Database) -> list:
    with db.engine.connect() as conn:
        ctx = MigrationContext.configure(
            conn,
            opts={"include_object": skip_fts, "compare_type": True, "compare_server_default": True},
        )
        return compare_metadata(ctx, Base.metadata)


def columns(path, table: str) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[1] for row in conn.execute(f"PRAGMA table_info({table})")]


# ----- models and migrations agree -----------------------------------------------------------


def test_models_and_migrations_agree(tmp_path):
    db = open_database(tmp_path / "fresh.db")
    try:
        assert db.current_revision() == head_revision()
        assert schema_diff(db) == []
    finally:
        db.close()


def described(diff: list) -> set[tuple]:
    """compare_metadata's differences as plain tuples: (op, table) for a table, (op, index)
    for an index, (op, table, column) for a column."""
    out = set()
    for d in diff:
        if d[0] == "add_column":
            out.add((d[0], d[2], d[3].name))
        else:
            out.add((d[0], d[1].name))
    return out


def diff_at(tmp_path, revision: str) -> set[tuple]:
    db = Database(tmp_path / f"at-{revision}.db")
    try:
        db.upgrade(revision)
        return described(schema_diff(db))
    finally:
        db.close()


NEW_IN_0007 = {
    ("add_table", "documents"), ("add_table", "document_chunks"), ("add_table", "message_attachments"),
    ("add_index", "ix_message_attachments_message_id"), ("add_index", "ix_message_attachments_sha256"),
    ("add_column", "messages", "sources_json"),
}
NEW_IN_0008 = {("add_column", "messages", "tool_json")}
NEW_IN_0009 = {("add_table", "jobs"), ("add_table", "job_items"), ("add_index", "ix_job_items_job_state")}
NEW_IN_0011 = {("add_column", "documents", "data")}  # 0010 changed a trigger only
NEW_IN_0012 = {("add_column", "job_items", "exchange_json")}
# 0013: stored Responses become conversations (the responses table goes).
NEW_IN_0013 = {("add_column", "conversations", "origin"), ("add_column", "messages", "response_id"),
               ("add_column", "messages", "api_json"), ("add_index", "ix_messages_response_id")}
GONE_IN_0013 = {("remove_table", "responses")}


def test_schema_comparison_sees_a_difference(tmp_path):
    """The agreement check is not vacuous: a database some revisions behind differs."""
    assert diff_at(tmp_path, "0004") - NEW_IN_0013 - NEW_IN_0009 - NEW_IN_0008 - NEW_IN_0007 == {
        ("add_column", "model_profiles", "source"), ("add_column", "model_profiles", "hub_repo"),
        ("add_column", "model_profiles", "last_used_at"), ("add_index", "ix_model_profiles_path")}


def test_the_responses_table_is_new_in_0006_and_gone_in_0013(tmp_path):
    assert diff_at(tmp_path, "0005") == NEW_IN_0007 | NEW_IN_0008 | NEW_IN_0009 | NEW_IN_0013
    assert diff_at(tmp_path, "0012") == NEW_IN_0013 | GONE_IN_0013


def test_the_documents_tables_are_new_in_0007(tmp_path):
    # documents made with data, so 0011's column is no difference
    assert diff_at(tmp_path, "0006") == NEW_IN_0007 | NEW_IN_0008 | NEW_IN_0009 | NEW_IN_0013 | GONE_IN_0013


def test_the_tool_column_is_new_in_0008(tmp_path):
    assert diff_at(tmp_path, "0007") == NEW_IN_0008 | NEW_IN_0009 | NEW_IN_0011 | NEW_IN_0013 | GONE_IN_0013


def test_the_jobs_tables_are_new_in_0009(tmp_path):
    # job_items made with exchange_json, so 0012's column is no difference
    assert diff_at(tmp_path, "0008") == NEW_IN_0009 | NEW_IN_0011 | NEW_IN_0013 | GONE_IN_0013


def test_an_images_bytes_are_new_in_0011(tmp_path):
    assert diff_at(tmp_path, "0010") == NEW_IN_0011 | NEW_IN_0012 | NEW_IN_0013 | GONE_IN_0013


def test_a_job_items_exchange_is_new_in_0012(tmp_path):
    assert diff_at(tmp_path, "0011") == NEW_IN_0012 | NEW_IN_0013 | GONE_IN_0013


def test_head_is_the_newest_revision():
    assert head_revision() == "0013"


# ----- upgrading an old database ------------------------------------------------------------------

T0 = "2024-03-01 09:00:00.000000"
T1 = "2024-03-01 09:00:05.000000"
T2 = "2024-03-01 09:01:00.000000"


def make_0001_database(path) -> None:
    """A database as revision 0001 left it, filled through raw SQL of that schema."""
    db = Database(path)
    db.upgrade("0001")
    assert db.current_revision() == "0001"
    db.close()
    conn = sqlite3.connect(path)
    try:
        conn.executescript(
            f"""
            INSERT INTO presets (id, name, system_prompt, sampling_json, created_at)
                VALUES (1, 'Terse', 'Answer briefly.', '{{"temperature": 0.2}}', '{T0}');
            INSERT INTO conversations (id, title, created_at, updated_at, model_ref, preset_id,
                    comparison_id, sampling_json, pinned, archived, active_message_id, deleted_at)
                VALUES (1, 'Penguin facts', '{T0}', '{T2}', 'tiny.gguf', 1, NULL,
                        '{{"top_k": 40}}', 1, 0, 4, NULL),
                       (2, 'Second chat', '{T0}', '{T1}', NULL, NULL, NULL, '{{}}', 0, 1, 5, NULL);
            INSERT INTO messages (id, conversation_id, parent_id, role, content, status,
                    error_text, prompt_tokens, completion_tokens, ttft_s, tokens_per_s, model,
                    created_at, updated_at)
                VALUES (1, 1, NULL, 'user', 'Where do penguins live?', 'complete',
                        NULL, NULL, NULL, NULL, NULL, NULL, '{T0}', '{T0}'),
                       (2, 1, 1, 'assistant', 'Mostly in Antarctica.', 'complete',
                        NULL, 20, 6, 0.5, 30.0, 'tiny.gguf', '{T1}', '{T1}'),
                       (3, 1, 1, 'assistant', 'In the southern hemisph', 'streaming',
                        NULL, NULL, 5, NULL, NULL, 'tiny.gguf', '{T1}', '{T1}'),
                       (4, 1, 1, 'assistant', '', 'error',
                        'context full', NULL, NULL, NULL, NULL, 'tiny.gguf', '{T2}', '{T2}'),
                       (5, 2, NULL, 'user', 'An archived walrus question', 'complete',
                        NULL, NULL, NULL, NULL, NULL, NULL, '{T1}', '{T1}');
            INSERT INTO settings (key, value_json) VALUES ('theme', '"dark"');
            """
        )
        conn.commit()
    finally:
        conn.close()


def test_old_database_upgrades_with_data_intact(tmp_path):
    path = tmp_path / "chats.db"
    make_0001_database(path)
    assert "owner_pid" not in columns(path, "messages")

    db = open_database(path)
    try:
        # at head, after a backup of the old file
        assert db.current_revision() == head_revision()
        backups = sorted(tmp_path.glob("chats.db.bak-0001-*"))
        assert len(backups) == 1
        assert db.backup_path == backups[0]
        with sqlite3.connect(backups[0]) as old:
            assert old.execute("SELECT version_num FROM alembic_version").fetchone() == ("0001",)
            assert old.execute("SELECT count(*) FROM messages").fetchone() == (5,)
            assert old.execute("SELECT title FROM conversations ORDER BY id").fetchall() == [
                ("Penguin facts",), ("Second chat",)]
        assert "owner_pid" not in columns(backups[0], "messages")

        # the new column, empty for old rows
        assert "owner_pid" in columns(path, "messages")
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT count(*) FROM messages WHERE owner_pid IS NOT NULL").fetchone() == (0,)
        assert schema_diff(db) == []

        repo = ChatRepository(db)
        conv = repo.get_conversation(1)
        assert (conv.title, conv.model_ref, conv.sampling, conv.pinned, conv.archived) == (
            "Penguin facts", "tiny.gguf", {"top_k": 40}, True, False)
        assert not conv.title_provisional  # 0004: an old title is kept, never replaced by a generated one
        assert CatalogRepository(db).get_preset(conv.preset_id).name == "Terse"
        assert CatalogRepository(db).get_setting("theme") == "dark"
        assert [c.id for c in repo.list_conversations(include_archived=True)] == [1, 2]
        path1 = repo.active_path(1)
        assert [m.id for m in path1.messages] == [1, 4]
        assert path1.position(4).sibling_ids == (2, 3, 4)
        answer = repo.get_message(2)
        assert (answer.content, answer.prompt_tokens, answer.completion_tokens, answer.ttft_s,
                answer.tokens_per_s, answer.model) == ("Mostly in Antarctica.", 20, 6, 0.5, 30.0, "tiny.gguf")
        assert answer.created_at.isoformat() == "2024-03-01T09:00:05+00:00"
        failed = repo.get_message(4)
        assert (failed.status, failed.error_text) == (MessageStatus.ERROR, "context full")

        # 0002 indexed the rows that were already there: messages, titles, other branches
        assert [h.message_id for h in search(db, "antarctica")] == [2]
        assert [h.message_id for h in search(db, "hemisph")] == [3]
        assert [(h.conversation_id, h.message_id) for h in search(db, "penguin")] == [(1, None), (1, 1)]
        assert [h.message_id for h in search(db, "walrus")] == [5]

        # a message left streaming by the old version recovers as interrupted
        assert repo.recover_interrupted() == 1
        partial = repo.get_message(3)
        assert (partial.status, partial.content) == (MessageStatus.INTERRUPTED, "In the southern hemisph")

        # the index triggers survived the upgrade: new rows, updates and deletes follow
        new = repo.add_message(1, "user", "And puffins?")
        assert [h.message_id for h in search(db, "puffins")] == [new.id]
        repo.rename(2, "Walrus notes")
        assert (2, None) in [(h.conversation_id, h.message_id) for h in search(db, "notes")]
        repo.delete(2)
        repo.purge_deleted()
        assert search(db, "walrus") == []
        # new rows get ids after the old ones
        assert new.id == 6
    finally:
        db.close()


def test_new_database_is_created_at_head_without_backup(tmp_path):
    path = tmp_path / "sub" / "new.db"
    db = open_database(path)
    try:
        assert path.exists()
        assert db.current_revision() == head_revision()
        assert db.backup_path is None
        assert list(path.parent.glob("*.bak-*")) == []
        conv = ChatRepository(db).create_conversation("works")
        assert ChatRepository(db).get_conversation(conv.id).title == "works"
    finally:
        db.close()


def test_empty_file_counts_as_new(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()
    db = open_database(path)
    try:
        assert db.current_revision() == head_revision()
        assert db.backup_path is None
        assert list(tmp_path.glob("*.bak-*")) == []
    finally:
        db.close()


def test_reopening_up_to_date_database_makes_no_backup(tmp_path):
    path = tmp_path / "chats.db"
    make_0001_database(path)
    open_database(path).close()
    assert len(list(tmp_path.glob("chats.db.bak-*"))) == 1
    for _ in range(2):
        db = open_database(path)
        try:
            assert db.backup_path is None
            assert db.current_revision() == head_revision()
            assert ChatRepository(db).get_message(2).content == "Mostly in Antarctica."
        finally:
            db.close()
    assert len(list(tmp_path.glob("chats.db.bak-*"))) == 1


def test_upgrade_from_each_old_revision(tmp_path):
    for rev in ("0001", "0002", "0003", "0004", "0005", "0006"):
        path = tmp_path / f"at-{rev}.db"
        old = Database(path)
        old.upgrade(rev)
        old.close()
        db = open_database(path)
        try:
            assert db.current_revision() == head_revision()
            assert db.backup_path is not None and db.backup_path.name.startswith(f"at-{rev}.db.bak-{rev}-")
            assert schema_diff(db) == []
        finally:
            db.close()


# ----- connection settings ------------------------------------------------------------------------


def pragmas(conn) -> tuple:
    return tuple(
        conn.exec_driver_sql(f"PRAGMA {name}").scalar()
        for name in ("journal_mode", "foreign_keys", "busy_timeout", "synchronous")
    )


EXPECTED = ("wal", 1, 5000, 1)  # synchronous NORMAL


def test_pragmas_on_every_connection(tmp_path):
    path = tmp_path / "chats.db"
    db = open_database(path)
    try:
        # several pooled connections open at once: each one is configured
        conns = [db.engine.connect() for _ in range(4)]
        try:
            assert [pragmas(c) for c in conns] == [EXPECTED] * 4
        finally:
            for c in conns:
                c.close()
        with db.begin() as s:
            assert pragmas(s.connection()) == EXPECTED

        seen = []

        def worker():
            with db.engine.connect() as c:
                seen.append(pragmas(c))

        threads = [threading.Thread(target=worker) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert seen == [EXPECTED] * 3

        # a second Database on the same file too, and after the pool was thrown away
        other = Database(path)
        try:
            with other.engine.connect() as c:
                assert pragmas(c) == EXPECTED
        finally:
            other.close()
        db.engine.dispose()
        with db.engine.connect() as c:
            assert pragmas(c) == EXPECTED
    finally:
        db.close()

    # A plain connection shows these are set by the engine (only WAL sticks to the file).
    with sqlite3.connect(path) as plain:
        assert plain.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert plain.execute("PRAGMA foreign_keys").fetchone() == (0,)


def test_foreign_keys_are_enforced(tmp_path):
    db = open_database(tmp_path / "chats.db")
    try:
        from sqlalchemy.exc import IntegrityError

        with pytest.raises(IntegrityError):
            with db.begin() as s:
                s.connection().exec_driver_sql(
                    "INSERT INTO messages (conversation_id, role, content, status, created_at, updated_at)"
                    " VALUES (999, 'user', 'orphan', 'complete', '2024-01-01', '2024-01-01')"
                )
    finally:
        db.close()


def test_a_database_from_a_newer_chorus_is_refused_untouched(tmp_path):
    import sqlite3

    from storage import open_database
    from storage.errors import StorageError

    path = tmp_path / "future.db"
    open_database(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '9999'")
    before = path.read_bytes()
    with pytest.raises(StorageError, match="newer Chorus"):
        open_database(path)
    assert path.read_bytes() == before
    assert not list(tmp_path.glob("future.db.bak-*"))


# ----- 0007: documents ------------------------------------------------------------------------


def make_0006_database(path) -> None:
    """A chat as revision 0006 left it: a question and its answer, through raw SQL."""
    db = Database(path)
    db.upgrade("0006")
    db.close()
    with sqlite3.connect(path) as conn:
        conn.executescript(
            f"""
            INSERT INTO conversations (id, title, title_provisional, created_at, updated_at,
                    sampling_json, pinned, archived, active_message_id)
                VALUES (1, 'Reading', 0, '{T0}', '{T1}', '{{}}', 0, 0, 2);
            INSERT INTO messages (id, conversation_id, parent_id, role, content, status, created_at, updated_at)
                VALUES (1, 1, NULL, 'user', 'Tell me about herons', 'complete', '{T0}', '{T0}'),
                       (2, 1, 1, 'assistant', 'Herons wade.', 'complete', '{T1}', '{T1}');
            """
        )


def alembic_downgrade(db: Database, revision: str) -> None:
    from alembic import command
    from alembic.config import Config

    from storage.database import MIGRATIONS

    with db.engine.connect() as conn, conn.begin():
        cfg = Config()
        cfg.set_main_option("script_location", str(MIGRATIONS))
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def test_a_0006_database_takes_documents_and_gives_them_back(tmp_path):
    from storage import DocumentRepository
    from tests.support.documents import new_document

    path = tmp_path / "chats.db"
    make_0006_database(path)
    db = open_database(path)
    try:
        assert db.backup_path is not None and db.backup_path.name.startswith("chats.db.bak-0006-")
        repo = ChatRepository(db)
        old = repo.active_path(1)
        assert [(m.content, m.sources) for m in old.messages] == [("Tell me about herons", ()), ("Herons wade.", ())]
        assert old.attachments == {}
        asked = repo.add_message(1, "user", "And egrets?", documents=[new_document("Egrets are white herons.")])
        assert [a.chars for a in repo.active_path(1).attachments[asked.id]] == [24]
        assert [h.document_name for h in search(db, "egrets")] == [None, "notes.txt"]
        assert [h.message_id for h in search(db, "wade")] == [2]  # 0002's triggers survived
        assert DocumentRepository(db).best_chunks([new_document("Egrets are white herons.").sha256], "white", 1)

        alembic_downgrade(db, "0006")
        assert db.current_revision() == "0006"
        assert "sources_json" not in columns(path, "messages")
        with sqlite3.connect(path) as conn:
            tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            assert not tables & {"documents", "document_chunks", "document_chunks_fts", "message_attachments"}
            assert conn.execute("SELECT content FROM messages ORDER BY id").fetchall() == [
                ("Tell me about herons",), ("Herons wade.",), ("And egrets?",)]
            # the message index's triggers are still there: a new message is found
            conn.execute(f"INSERT INTO messages (conversation_id, role, content, status, created_at, updated_at) "
                         f"VALUES (1, 'user', 'storks', 'complete', '{T2}', '{T2}')")
            found = conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'storks'")
            assert found.fetchone() == (1,)
    finally:
        db.close()


# ----- 0013: stored Responses become conversations ------------------------------------------------

IMAGE_TURN = {"role": "user", "content": [{"type": "text", "text": "What is this?"},
                                          {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}


def make_0012_database_with_responses(path) -> None:
    """Four stored responses as 0006-0012 kept them (each row its whole conversation): a
    chain a <- b, a branch c continuing a too, and d on its own with an image."""
    import json

    db = Database(path)
    db.upgrade("0012")
    db.close()
    hi = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi, I am Ada."}]
    after_a = [*hi, {"role": "assistant", "content": "Hello Ada."}]
    rows = [("resp_a", T0, hi, "Hello Ada.", None, "completed"),
            ("resp_b", T1, [*after_a, {"role": "user", "content": "My name?"}], "Ada", "resp_a", "incomplete"),
            ("resp_c", T2, [*after_a, {"role": "user", "content": "Weather?"}], "Sunny.", "resp_a", "completed"),
            ("resp_d", T2, [IMAGE_TURN], "A dot.", None, "completed")]
    conn = sqlite3.connect(path)
    try:
        conn.executemany(
            "INSERT INTO responses (id, created_at, model, input_json, output_text, previous_response_id, status, "
            "usage_json) VALUES (?, ?, 'tiny', ?, ?, ?, ?, ?)",
            [(rid, t, json.dumps(turns), out, prev, status, json.dumps({"input_tokens": 9, "output_tokens": 2}))
             for rid, t, turns, out, prev, status in rows])
        conn.execute(f"INSERT INTO conversations (id, title, created_at, updated_at, sampling_json, pinned, archived) "
                     f"VALUES (1, 'A chat', '{T0}', '{T0}', '{{}}', 0, 0)")
        conn.commit()
    finally:
        conn.close()


def test_a_0012_databases_responses_become_branches_and_come_back(tmp_path):
    from storage import ResponsesRepository

    path = tmp_path / "chats.db"
    make_0012_database_with_responses(path)
    db = open_database(path)
    try:
        repo = ResponsesRepository(db)
        b = repo.get("resp_b")
        assert b is not None and (b.input, b.output_text, b.status, b.previous_response_id) == (
            [{"role": "user", "content": "My name?"}], "Ada", "incomplete", "resp_a")
        assert b.usage == {"input_tokens": 9, "output_tokens": 2}
        assert repo.conversation("resp_c") == [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi, I am Ada."},
            {"role": "assistant", "content": "Hello Ada."}, {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": "Sunny."}]
        assert repo.conversation("resp_d") == [IMAGE_TURN, {"role": "assistant", "content": "A dot."}]
        with sqlite3.connect(path) as conn:  # a, b and c in one tree (b and c branches under a's reply), d alone
            assert conn.execute("SELECT origin, count(*) FROM conversations GROUP BY origin").fetchall() == [
                ("api", 2), ("chat", 1)]
            assert conn.execute("SELECT count(*) FROM messages").fetchone() == (9,)
        assert [c.title for c in ChatRepository(db).list_conversations()] == ["A chat"]

        alembic_downgrade(db, "0012")
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT id, previous_response_id, status, output_text FROM responses "
                                "ORDER BY id").fetchall() == [
                ("resp_a", None, "completed", "Hello Ada."), ("resp_b", "resp_a", "incomplete", "Ada"),
                ("resp_c", "resp_a", "completed", "Sunny."), ("resp_d", None, "completed", "A dot.")]
            import json
            (whole_b,) = conn.execute("SELECT input_json FROM responses WHERE id = 'resp_b'").fetchone()
            assert json.loads(whole_b)[-2:] == [{"role": "assistant", "content": "Hello Ada."},
                                                {"role": "user", "content": "My name?"}]
            assert conn.execute("SELECT count(*) FROM conversations").fetchone() == (1,)
            assert "origin" not in columns(path, "conversations") and "response_id" not in columns(path, "messages")
    finally:
        db.close()
