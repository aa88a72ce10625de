"""An import written in short transactions: hidden until its last step, undone whole when a
step fails, and a chat saving its reply meanwhile (another connection to the same file, as
another process would have) is never locked out for long. Real SQLite files throughout."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest

from app.chats.recorder import ReplyRecorder
from inference.outputs import Delta, FinishReason
from storage import ChatRepository, DatabaseBusy, MessageStatus, import_writer, open_database, search
from storage import database as database_module
from storage.catalog import CatalogRepository
from storage.chat_file_format import export_json, import_data


def chats_file(conversations: int, messages: int = 4, comparison: bool = False) -> dict:
    convs = []
    for i in range(conversations):
        convs.append({
            "id": i + 1, "title": f"imported owl chat {i}",
            "preset": {"name": "Terse", "system_prompt": "Be brief."} if i % 10 == 0 else None,
            "comparison": "g" if comparison and i < 2 else None,
            "messages": [{"id": j + 1, "parent": j or None, "role": ("user", "assistant")[j % 2],
                          "content": f"owls {i}.{j}"} for j in range(messages)],
            "active_message": 2 if messages > 2 else None,
        })
    data: dict = {"format": "chorus-chats", "version": 1, "conversations": convs}
    if comparison:
        data["comparisons"] = [{"id": "g", "title": "two owls", "settings": {"panes": [1, 2]}}]
    return data


def table_counts(path) -> dict[str, int]:
    with sqlite3.connect(path) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                for t in ("conversations", "messages", "presets", "comparisons", "messages_fts")}


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setattr(import_writer, "BATCH_ROWS", 7)
    monkeypatch.setattr(import_writer, "MAX_PAUSE_S", 0.0)


def test_batches_split_long_conversations_and_keep_every_tree(db, repo, small_batches, tmp_path):
    data = chats_file(5, messages=20, comparison=True)  # each conversation spans 3+ batches
    remap = lambda settings, members: {"panes": [members[i] for i in settings["panes"]]}  # noqa: E731
    result = import_data(db, data, remap=remap)
    assert result.messages == 100 and len(result.conversation_ids) == 5
    for conv_id, original in zip(result.conversation_ids, data["conversations"]):
        conv = repo.get_conversation(conv_id)
        assert conv.title == original["title"] and not conv.deleted
        path = repo.active_path(conv_id)
        assert [m.content for m in path.messages] == [m["content"] for m in original["messages"][:2]]
        assert conv.active_message_id == path.messages[-1].id
    # The whole tree: each message's parent is the one before it, in the same conversation.
    exported = export_json(db, result.conversation_ids)["conversations"]
    for conv in exported:
        ids = [m["id"] for m in conv["messages"]]
        assert [m["parent"] for m in conv["messages"]] == [None, *ids[:-1]]
    (comparison,) = CatalogRepository(db).list_comparisons()
    assert comparison.conversation_ids == tuple(result.conversation_ids[:2])
    assert comparison.settings == {"panes": list(result.conversation_ids[:2])}
    presets = CatalogRepository(db).list_presets()
    assert [p.name for p in presets] == ["Terse"]
    assert repo.get_conversation(result.conversation_ids[0]).preset_id == presets[0].id
    assert len(search(db, "owls")) > 0


def test_nothing_is_visible_until_the_last_step_and_others_write_between_batches(db, repo, small_batches,
                                                                               monkeypatch):
    seen: list[tuple[int, int, int]] = []
    prepare = import_writer._prepare

    def between_batches(job, batch):
        if len(seen) < 3 and job.written:  # some batches are in the file already
            mine = repo.create_conversation("written during the import")  # not locked out
            seen.append((len(repo.list_conversations()), len(search(db, "owls")),
                         len(CatalogRepository(db).list_comparisons())))
            repo.delete(mine.id)
        return prepare(job, batch)

    monkeypatch.setattr(import_writer, "_prepare", between_batches)
    result = import_data(db, chats_file(10, comparison=True))
    assert seen == [(1, 0, 0)] * 3  # only the conversation written meanwhile
    assert len(repo.list_conversations()) == 10 and len(result.conversation_ids) == 10


def test_a_failing_batch_undoes_the_batches_before_it(db, repo, small_batches, monkeypatch):
    before = table_counts(db.path)
    write = import_writer._write_batch
    calls = []

    def fail_on_the_fourth(conn, job, rows):
        calls.append(1)
        if len(calls) == 4:
            raise sqlite3.OperationalError("disk I/O error")
        write(conn, job, rows)

    monkeypatch.setattr(import_writer, "_write_batch", fail_on_the_fourth)
    with pytest.raises(sqlite3.OperationalError):
        import_data(db, chats_file(10, comparison=True))
    assert len(calls) == 4
    assert table_counts(db.path) == before
    assert repo.list_conversations() == []


def test_a_failing_last_step_undoes_everything(db, repo, small_batches, monkeypatch):
    CatalogRepository(db).create_preset("Terse", "Be brief.")
    before = table_counts(db.path)

    def remap(settings, members):
        raise KeyError("the app's remap failed")

    with pytest.raises(KeyError):
        import_data(db, chats_file(10, comparison=True), remap=remap)
    assert table_counts(db.path) == before
    assert [p.name for p in CatalogRepository(db).list_presets()] == ["Terse"]


def test_what_a_dead_import_left_is_hidden_and_purged_with_the_deleted(db, repo, small_batches, monkeypatch):
    """A process killed mid-import cannot undo: its rows stay hidden, then purged a day later."""
    monkeypatch.setattr(import_writer, "_undo", lambda db, job: None)  # as if killed
    monkeypatch.setattr(import_writer, "_publish", lambda *a: (_ for _ in ()).throw(SystemExit))
    with pytest.raises(SystemExit):
        import_data(db, chats_file(6))
    assert table_counts(db.path)["conversations"] == 6
    assert repo.list_conversations() == [] and search(db, "owls") == []
    assert repo.purge_deleted() == 6
    assert table_counts(db.path)["messages"] == 0


@pytest.fixture
def short_busy_timeout(monkeypatch):
    """SQLite's busy timeout at 0.2 s instead of 5: a lock held 'longer than the timeout'
    takes a second here, not many."""
    monkeypatch.setattr(database_module, "BUSY_TIMEOUT_MS", 200)


def start_reply(repo) -> int:
    conv = repo.create_conversation("live chat")
    repo.add_message(conv.id, "user", "hello")
    return repo.start_reply(conv.id, model="tiny.gguf").id


def test_a_reply_streams_and_finishes_complete_while_a_big_import_runs(tmp_path, short_busy_timeout):
    """The issue's run: an import (one Database, as `chorus import`) and a chat saving its
    streamed reply (another, as `chorus chat`) on one file. Every checkpoint is due at once."""
    path = tmp_path / "chorus.db"
    importer, chat = open_database(path), open_database(path)
    repo = ChatRepository(chat)
    reply_id = start_reply(repo)
    recorder = ReplyRecorder(repo, reply_id, every_s=0.0)
    result: list = []
    worker = threading.Thread(target=lambda: result.append(import_data(importer, chats_file(3000))))
    worker.start()
    pieces = []
    while worker.is_alive() or len(pieces) < 20:
        pieces.append(f"w{len(pieces)} ")
        recorder.on_delta(Delta("r1", text=pieces[-1], token_ids=(1,)))
    recorder.on_delta(Delta("r1", text="end.", token_ids=(2,), finish_reason=FinishReason.STOP))
    worker.join(timeout=300)
    saved = repo.get_message(reply_id)
    assert saved.status is MessageStatus.COMPLETE and saved.content == "".join(pieces) + "end."
    assert len(result[0].conversation_ids) == 3000
    assert len(repo.list_conversations()) == 3001
    importer.close()
    chat.close()


def hold_write_lock(path, seconds: float, taken: threading.Event) -> threading.Thread:
    def hold() -> None:
        conn = sqlite3.connect(path, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        taken.set()
        time.sleep(seconds)  # what is tested: a lock held this long by another connection
        conn.execute("COMMIT")
        conn.close()

    thread = threading.Thread(target=hold)
    thread.start()
    return thread


def test_the_end_of_a_reply_waits_out_a_lock_held_past_the_busy_timeout(tmp_path, short_busy_timeout):
    db = open_database(tmp_path / "chorus.db")
    repo = ChatRepository(db)
    reply_id = start_reply(repo)
    recorder = ReplyRecorder(repo, reply_id, every_s=0.0)
    recorder.on_delta(Delta("r1", text="saved ", token_ids=(1,)))
    taken = threading.Event()
    holder = hold_write_lock(db.path, 1.5, taken)  # 7 busy timeouts
    taken.wait(10)
    recorder.on_delta(Delta("r1", text="while locked ", token_ids=(2,)))  # skipped, kept
    assert repo.get_message(reply_id).content == "saved "
    recorder.on_delta(Delta("r1", text="end", token_ids=(3,), finish_reason=FinishReason.STOP))
    assert not holder.is_alive()  # the write got in once the lock was released
    saved = repo.get_message(reply_id)
    assert saved.status is MessageStatus.COMPLETE and saved.content == "saved while locked end"
    holder.join()
    db.close()


def test_a_lock_held_past_the_retry_budget_is_a_clear_error_and_the_checkpoint_stays(tmp_path,
                                                                                     short_busy_timeout):
    db = open_database(tmp_path / "chorus.db")
    repo = ChatRepository(db)
    reply_id = start_reply(repo)
    recorder = ReplyRecorder(repo, reply_id, every_s=0.0, finish_retry_s=0.5)
    recorder.on_delta(Delta("r1", text="saved ", token_ids=(1,)))
    taken = threading.Event()
    holder = hold_write_lock(db.path, 3.0, taken)
    taken.wait(10)
    with pytest.raises(DatabaseBusy, match="could not save the reply: the chat database stayed locked"):
        recorder.on_delta(Delta("r1", text="lost", token_ids=(2,),
                                finish_reason=FinishReason.STOP))
    holder.join()
    assert repo.get_message(reply_id).content == "saved "  # reopens interrupted at its checkpoint
    db.close()


def test_an_import_waits_out_a_lock_held_past_the_busy_timeout(tmp_path, short_busy_timeout):
    """The other way round: a writer holding the lock mid-import delays the import, which
    then completes whole."""
    db = open_database(tmp_path / "chorus.db")
    taken = threading.Event()
    holder = hold_write_lock(db.path, 1.5, taken)
    taken.wait(10)
    result = import_data(db, chats_file(50))
    assert not holder.is_alive()
    assert len(ChatRepository(db).list_conversations()) == len(result.conversation_ids) == 50
    holder.join()
    db.close()
