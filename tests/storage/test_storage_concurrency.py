"""Threads and several engines on one SQLite file (WAL): no errors, no torn reads."""

from __future__ import annotations

import sqlite3
import threading
import time

from storage import ChatRepository, Database, MessageStatus, open_database, search

CHECKPOINTS = 200


def run_threads(targets, timeout: float = 30.0) -> list[BaseException]:
    errors: list[BaseException] = []

    def wrap(fn):
        def body():
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported to the test
                errors.append(exc)
        return body

    threads = [threading.Thread(target=wrap(fn), daemon=True) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread hung"
    return errors


def word(i: int) -> str:
    return f"w{i} "


def test_checkpoints_while_readers_read(db):
    repo = ChatRepository(db)
    conv = repo.create_conversation("streaming")
    repo.add_message(conv.id, "user", "write a long text about zeppelins")
    reply = repo.start_reply(conv.id)
    full = "zeppelin " + "".join(word(i) for i in range(CHECKPOINTS))
    done = threading.Event()
    started = threading.Barrier(3)
    observed: dict[str, list[int]] = {"path": [], "search": []}

    def writer():
        started.wait()
        try:
            text = "zeppelin "
            for i in range(CHECKPOINTS):
                text += word(i)
                repo.checkpoint(reply.id, text, completion_tokens=i + 1)
            repo.finish_reply(reply.id, text, completion_tokens=CHECKPOINTS)
        finally:
            done.set()

    def path_reader():
        started.wait()
        while True:
            finished = done.is_set()
            path = ChatRepository(db).active_path(conv.id)
            assert [m.role for m in path.messages] == ["user", "assistant"]
            content = path.messages[-1].content
            assert full.startswith(content)  # a prefix of the final text, never torn
            observed["path"].append(len(content))
            if finished:
                break
            time.sleep(0.001)  # leave the writer some of the GIL

    def search_reader():
        started.wait()
        while True:
            finished = done.is_set()
            hits = [h for h in search(db, "zeppelin") if h.message_id == reply.id]
            for hit in hits:
                assert hit.snippet_text.startswith("zeppelin")
            observed["search"].append(len(hits))
            if finished:
                break
            time.sleep(0.001)

    errors = run_threads([writer, path_reader, search_reader])
    assert errors == []

    lengths = observed["path"]
    assert lengths == sorted(lengths), "a reader saw the text shrink"
    assert lengths[-1] == len(full)
    assert len(set(lengths)) > 2, "the readers never overlapped the writer"
    found = observed["search"]
    assert found[-1] == 1
    assert found == sorted(found)  # once indexed, always found
    final = repo.get_message(reply.id)
    assert final.content == full
    assert final.status is MessageStatus.COMPLETE
    assert final.completion_tokens == CHECKPOINTS


def test_two_databases_write_to_one_file_concurrently(tmp_path):
    """Two engines (as two processes would have) writing different conversations."""
    path = tmp_path / "shared.db"
    open_database(path).close()
    dbs = [Database(path), Database(path)]
    rounds = 60
    start = threading.Barrier(len(dbs))
    conv_ids: list[int] = []

    def make_writer(db: Database, n: int):
        repo = ChatRepository(db)
        conv = repo.create_conversation(f"writer {n}")
        conv_ids.append(conv.id)

        def body():
            start.wait()
            for i in range(rounds):
                repo.add_message(conv.id, "user", f"question {n}-{i}")
                reply = repo.start_reply(conv.id)
                repo.checkpoint(reply.id, f"answer {n}-{i} so far")
                repo.finish_reply(reply.id, f"answer {n}-{i}", completion_tokens=i)
                if i % 10 == 0:
                    repo.rename(conv.id, f"writer {n} after {i}")
                    repo.list_conversations()
        return body

    try:
        writers = [make_writer(db, n) for n, db in enumerate(dbs)]
        errors = run_threads(writers)
        assert errors == [], [str(e) for e in errors]
    finally:
        for db in dbs:
            db.close()

    with sqlite3.connect(path) as conn:
        for n, conv_id in enumerate(conv_ids):
            rows = conn.execute(
                "SELECT role, content, status FROM messages WHERE conversation_id = ? ORDER BY id",
                (conv_id,),
            ).fetchall()
            assert len(rows) == 2 * rounds
            assert rows[-1] == ("assistant", f"answer {n}-{rounds - 1}", "complete")
            assert all(status == "complete" for _, _, status in rows)
    db = open_database(path)
    try:
        repo = ChatRepository(db)
        for n, conv_id in enumerate(conv_ids):
            path_msgs = repo.active_path(conv_id).messages
            assert len(path_msgs) == 2 * rounds  # one straight chain each
            assert [m.content for m in path_msgs[:2]] == [f"question {n}-0", f"answer {n}-0"]
        assert len([h for h in search(db, "answer") if h.message_id]) == 20  # default limit
    finally:
        db.close()


def test_many_threads_share_one_database(db):
    """Worker threads each with their own conversation on one Database (one pool)."""
    repo = ChatRepository(db)
    convs = [repo.create_conversation(f"t{n}") for n in range(4)]

    def make(conv_id):
        def body():
            for i in range(25):
                repo.add_message(conv_id, "user", f"m{i}")
                repo.active_path(conv_id)
        return body

    assert run_threads([make(c.id) for c in convs]) == []
    for c in convs:
        assert [m.content for m in repo.active_path(c.id).messages] == [f"m{i}" for i in range(25)]
