"""Conversations and message trees in a real SQLite file (no model, no engine)."""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from storage import MessageStatus, NotFoundError, StorageError, search


def raw_count(db, sql: str, *args) -> int:
    with sqlite3.connect(db.path) as conn:
        return conn.execute(sql, args).fetchone()[0]


def raw_exec(db, sql: str, *args) -> None:
    conn = sqlite3.connect(db.path)
    try:
        conn.execute(sql, args)
        conn.commit()
    finally:
        conn.close()


def ids(records) -> list[int]:
    return [r.id for r in records]


# ----- conversations ----------------------------------------------------------------------


def test_create_get_update_conversation(repo):
    conv = repo.create_conversation("First", model_ref="qwen.gguf", sampling={"temperature": 0.3})
    assert conv.id > 0
    assert conv.title == "First"
    assert conv.model_ref == "qwen.gguf"
    assert conv.sampling == {"temperature": 0.3}
    assert not conv.pinned and not conv.archived and not conv.deleted
    assert conv.active_message_id is None
    assert conv.created_at.tzinfo is not None

    got = repo.get_conversation(conv.id)
    assert got == conv

    renamed = repo.rename(conv.id, "Renamed")
    assert renamed.title == "Renamed"
    assert renamed.updated_at == conv.updated_at  # a title is not activity: the sidebar's order stays
    updated = repo.update_conversation(conv.id, sampling={"top_k": 5}, model_ref=None)
    again = repo.get_conversation(conv.id)
    assert again.title == "Renamed"
    assert again.sampling == {"top_k": 5}
    assert again.model_ref is None
    assert again == updated


def test_update_conversation_refuses_unknown_field(repo):
    conv = repo.create_conversation("x")
    with pytest.raises(StorageError, match="active_message_id"):
        repo.update_conversation(conv.id, active_message_id=3)


def test_list_orders_pinned_first_then_recently_updated(repo):
    c1 = repo.create_conversation("one")
    c2 = repo.create_conversation("two")
    c3 = repo.create_conversation("three")
    assert ids(repo.list_conversations()) == [c3.id, c2.id, c1.id]

    repo.add_message(c1.id, "user", "one again")  # updated most recently
    assert ids(repo.list_conversations()) == [c1.id, c3.id, c2.id]

    repo.update_conversation(c2.id, pinned=True)
    repo.add_message(c3.id, "user", "three again")  # newer than the pinned one, still after it
    assert ids(repo.list_conversations()) == [c2.id, c3.id, c1.id]

    repo.rename(c1.id, "one renamed")  # a title is not activity: the order stays
    assert ids(repo.list_conversations()) == [c2.id, c3.id, c1.id]

    repo.add_message(c1.id, "user", "hello")  # a new message counts as an update
    assert ids(repo.list_conversations()) == [c2.id, c1.id, c3.id]


def test_list_filters_archived_and_deleted(repo):
    keep = repo.create_conversation("keep")
    archived = repo.create_conversation("archived")
    deleted = repo.create_conversation("deleted")
    repo.update_conversation(archived.id, archived=True)
    repo.delete(deleted.id)

    assert ids(repo.list_conversations()) == [keep.id]
    assert set(ids(repo.list_conversations(include_archived=True))) == {keep.id, archived.id}
    assert set(ids(repo.list_conversations(include_deleted=True))) == {keep.id, deleted.id}
    everything = repo.list_conversations(include_archived=True, include_deleted=True)
    assert set(ids(everything)) == {keep.id, archived.id, deleted.id}
    flags = {c.id: (c.archived, c.deleted) for c in everything}
    assert flags == {keep.id: (False, False), archived.id: (True, False), deleted.id: (False, True)}


def test_unknown_ids_raise_not_found(repo):
    conv = repo.create_conversation("x")
    with pytest.raises(NotFoundError):
        repo.get_conversation(999)
    with pytest.raises(NotFoundError):
        repo.update_conversation(999, title="y")
    with pytest.raises(NotFoundError):
        repo.delete(999)
    with pytest.raises(NotFoundError):
        repo.restore(999)
    with pytest.raises(NotFoundError):
        repo.add_message(999, "user", "hi")
    with pytest.raises(NotFoundError):
        repo.active_path(999)
    for call in (repo.get_message, repo.siblings, repo.switch_to):
        with pytest.raises(NotFoundError):
            call(12345)
    with pytest.raises(NotFoundError):
        repo.finish_reply(12345, "text")
    with pytest.raises(NotFoundError):
        repo.edit_message(12345, "text")
    # NotFoundError is a StorageError and a LookupError
    assert issubclass(NotFoundError, StorageError) and issubclass(NotFoundError, LookupError)
    assert repo.get_conversation(conv.id).title == "x"


# ----- messages -----------------------------------------------------------------------------


def test_add_message_defaults_to_active_leaf(repo):
    conv = repo.create_conversation("chat")
    u1 = repo.add_message(conv.id, "user", "hi")
    assert u1.parent_id is None
    a1 = repo.add_message(conv.id, "assistant", "hello")
    assert a1.parent_id == u1.id
    u2 = repo.add_message(conv.id, "user", "how are you?")
    assert u2.parent_id == a1.id
    assert repo.get_conversation(conv.id).active_message_id == u2.id
    # An explicit parent starts a branch there and makes the new message active.
    side = repo.add_message(conv.id, "user", "other question", parent_id=a1.id)
    assert side.parent_id == a1.id
    assert repo.get_conversation(conv.id).active_message_id == side.id
    # parent_id=None: a new root
    root2 = repo.add_message(conv.id, "system", "be brief", parent_id=None)
    assert root2.parent_id is None


def test_add_message_refuses_bad_role(repo):
    conv = repo.create_conversation("chat")
    with pytest.raises(StorageError, match="role"):
        repo.add_message(conv.id, "wizard", "abracadabra")
    assert raw_count(repo.db, "SELECT count(*) FROM messages") == 0


def test_parent_from_another_conversation_is_refused(repo):
    a = repo.create_conversation("a")
    b = repo.create_conversation("b")
    in_a = repo.add_message(a.id, "user", "in a")
    with pytest.raises(StorageError, match="not in conversation"):
        repo.add_message(b.id, "user", "in b", parent_id=in_a.id)
    with pytest.raises(StorageError):
        repo.start_reply(b.id, parent_id=in_a.id)
    with pytest.raises(StorageError):  # a parent that does not exist at all
        repo.add_message(b.id, "user", "in b", parent_id=424242)
    assert raw_count(repo.db, "SELECT count(*) FROM messages WHERE conversation_id = ?", b.id) == 0
    assert repo.get_conversation(b.id).active_message_id is None


def test_streaming_reply_lifecycle(repo):
    conv = repo.create_conversation("chat")
    user = repo.add_message(conv.id, "user", "tell me a story")
    reply = repo.start_reply(conv.id, model="tiny.gguf")
    assert reply.role == "assistant"
    assert reply.parent_id == user.id
    assert reply.status is MessageStatus.STREAMING
    assert reply.content == ""
    assert reply.model == "tiny.gguf"
    assert repo.get_conversation(conv.id).active_message_id == reply.id
    owner = raw_count(repo.db, "SELECT owner_pid FROM messages WHERE id = ?", reply.id)
    assert owner == os.getpid()

    repo.checkpoint(reply.id, "Once upon", completion_tokens=2)
    mid = repo.get_message(reply.id)
    assert mid.content == "Once upon"
    assert mid.completion_tokens == 2
    assert mid.status is MessageStatus.STREAMING
    assert mid.updated_at >= reply.updated_at
    repo.checkpoint(reply.id, "Once upon a time")  # tokens left as they were
    assert repo.get_message(reply.id).completion_tokens == 2

    done = repo.finish_reply(
        reply.id, "Once upon a time, the end.", prompt_tokens=7, completion_tokens=8,
        ttft_s=0.25, tokens_per_s=42.5,
    )
    assert done.status is MessageStatus.COMPLETE
    assert done.content == "Once upon a time, the end."
    assert (done.prompt_tokens, done.completion_tokens, done.ttft_s, done.tokens_per_s) == (7, 8, 0.25, 42.5)
    assert done.error_text is None
    assert repo.get_message(reply.id) == done
    assert raw_count(repo.db, "SELECT owner_pid IS NULL FROM messages WHERE id = ?", reply.id) == 1


def test_finish_reply_with_error(repo):
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "q")
    reply = repo.start_reply(conv.id)
    repo.checkpoint(reply.id, "partial")
    failed = repo.finish_reply(reply.id, "partial", status=MessageStatus.ERROR, error_text="out of memory")
    assert failed.status is MessageStatus.ERROR
    assert failed.error_text == "out of memory"
    assert repo.get_message(reply.id).error_text == "out of memory"


def test_checkpoint_on_non_streaming_message_raises(repo):
    conv = repo.create_conversation("chat")
    user = repo.add_message(conv.id, "user", "complete already")
    with pytest.raises(StorageError, match="not streaming"):
        repo.checkpoint(user.id, "overwritten?")
    assert repo.get_message(user.id).content == "complete already"

    reply = repo.start_reply(conv.id)
    repo.finish_reply(reply.id, "final")
    with pytest.raises(StorageError):
        repo.checkpoint(reply.id, "late checkpoint")
    assert repo.get_message(reply.id).content == "final"
    with pytest.raises(StorageError):
        repo.checkpoint(987654, "nobody")


def test_regenerate_creates_sibling_and_keeps_old_branch(repo):
    conv = repo.create_conversation("chat")
    user = repo.add_message(conv.id, "user", "question")
    first = repo.start_reply(conv.id)
    repo.finish_reply(first.id, "first answer")
    second = repo.start_reply(conv.id, parent_id=user.id)  # regenerate
    repo.finish_reply(second.id, "second answer")

    assert second.parent_id == user.id
    assert repo.siblings(first.id) == [first.id, second.id]
    assert repo.siblings(second.id) == [first.id, second.id]
    assert repo.get_message(first.id).content == "first answer"

    path = repo.active_path(conv.id)
    assert [m.content for m in path.messages] == ["question", "second answer"]
    pos = path.position(second.id)
    assert (pos.index, pos.count, pos.sibling_ids) == (2, 2, (first.id, second.id))
    assert path.branches[second.id] == pos
    assert user.id not in path.branches
    assert path.position(user.id).count == 1
    assert path.position(user.id).sibling_ids == (user.id,)

    assert repo.switch_to(first.id) == first.id
    path = repo.active_path(conv.id)
    assert [m.content for m in path.messages] == ["question", "first answer"]
    assert (path.position(first.id).index, path.position(first.id).count) == (1, 2)


def test_edit_message_creates_sibling_with_old_branch_intact(repo):
    conv = repo.create_conversation("chat")
    u1 = repo.add_message(conv.id, "user", "hi")
    a1 = repo.add_message(conv.id, "assistant", "hello")
    u2 = repo.add_message(conv.id, "user", "what is 2+2")
    a2 = repo.add_message(conv.id, "assistant", "5")

    edited = repo.edit_message(u2.id, "what is 2+3")
    assert edited.id != u2.id
    assert edited.parent_id == a1.id
    assert edited.role == "user"
    assert edited.content == "what is 2+3"
    assert repo.get_message(u2.id).content == "what is 2+2"  # original untouched
    assert repo.get_message(a2.id).parent_id == u2.id  # its reply too
    assert repo.siblings(u2.id) == [u2.id, edited.id]

    path = repo.active_path(conv.id)
    assert ids(path.messages) == [u1.id, a1.id, edited.id]
    assert path.position(edited.id).index == 2
    assert path.position(edited.id).count == 2

    # editing a root message makes a sibling root
    root_edit = repo.edit_message(u1.id, "hey")
    assert root_edit.parent_id is None
    assert repo.siblings(u1.id) == [u1.id, root_edit.id]
    assert ids(repo.active_path(conv.id).messages) == [root_edit.id]


def test_active_path_root_first_with_all_fields(repo):
    conv = repo.create_conversation("chat")
    assert repo.active_path(conv.id).messages == []
    assert repo.active_path(conv.id).branches == {}
    chain = [
        repo.add_message(conv.id, role, f"m{i}")
        for i, role in enumerate(["system", "user", "assistant", "user", "assistant", "user"])
    ]
    path = repo.active_path(conv.id)
    assert path.conversation.id == conv.id
    assert path.conversation.active_message_id == chain[-1].id
    assert path.messages == chain  # same records, root first
    assert path.branches == {}
    assert all(m.created_at.tzinfo is not None for m in path.messages)


def test_branch_positions_at_several_levels(repo):
    conv = repo.create_conversation("chat")
    root_a = repo.add_message(conv.id, "user", "A")
    reply_a1 = repo.add_message(conv.id, "assistant", "A1")
    reply_a2 = repo.add_message(conv.id, "assistant", "A2", parent_id=root_a.id)
    reply_a3 = repo.add_message(conv.id, "assistant", "A3", parent_id=root_a.id)
    root_b = repo.add_message(conv.id, "user", "B", parent_id=None)
    repo.switch_to(reply_a2.id)
    follow = repo.add_message(conv.id, "user", "follow-up")

    path = repo.active_path(conv.id)
    assert ids(path.messages) == [root_a.id, reply_a2.id, follow.id]
    assert path.branches[root_a.id].index == 1
    assert path.branches[root_a.id].count == 2
    assert path.branches[root_a.id].sibling_ids == (root_a.id, root_b.id)
    assert path.branches[reply_a2.id].index == 2
    assert path.branches[reply_a2.id].count == 3
    assert path.branches[reply_a2.id].sibling_ids == (reply_a1.id, reply_a2.id, reply_a3.id)
    assert follow.id not in path.branches
    assert repo.siblings(root_b.id) == [root_a.id, root_b.id]
    assert repo.siblings(follow.id) == [follow.id]


def test_branch_positions_do_not_mix_conversations(repo):
    a = repo.create_conversation("a")
    b = repo.create_conversation("b")
    ra = repo.add_message(a.id, "user", "root of a")
    rb = repo.add_message(b.id, "user", "root of b")
    assert repo.siblings(ra.id) == [ra.id]
    assert repo.siblings(rb.id) == [rb.id]
    assert repo.active_path(a.id).branches == {}


def test_switch_to_goes_to_newest_leaf_under_message(repo):
    conv = repo.create_conversation("chat")
    u = repo.add_message(conv.id, "user", "q")
    old = repo.add_message(conv.id, "assistant", "old answer")
    old_follow = repo.add_message(conv.id, "user", "more on old")
    old_leaf = repo.add_message(conv.id, "assistant", "old leaf")
    new = repo.add_message(conv.id, "assistant", "new answer", parent_id=u.id)

    # from a sibling: down its own branch to its leaf
    assert repo.switch_to(old.id) == old_leaf.id
    assert repo.get_conversation(conv.id).active_message_id == old_leaf.id
    assert ids(repo.active_path(conv.id).messages) == [u.id, old.id, old_follow.id, old_leaf.id]
    assert repo.switch_to(new.id) == new.id
    # a leaf stays itself
    assert repo.switch_to(old_leaf.id) == old_leaf.id

    # Continue the old branch later: its leaf is now the newest under the user message.
    repo.switch_to(old.id)
    newest = repo.add_message(conv.id, "user", "newest, on the old branch")
    repo.switch_to(new.id)
    assert repo.switch_to(u.id) == newest.id
    assert ids(repo.active_path(conv.id).messages)[-1] == newest.id


# ----- soft delete, restore, purge -------------------------------------------------------


def _chat_with_words(repo, title: str, word: str):
    conv = repo.create_conversation(title)
    repo.add_message(conv.id, "user", f"tell me about {word}")
    repo.add_message(conv.id, "assistant", f"{word} is interesting")
    return conv


def test_soft_delete_hides_from_list_and_search_and_restore_brings_back(repo, db):
    conv = _chat_with_words(repo, "Zebras", "zebra")
    other = _chat_with_words(repo, "Lions", "lion")
    assert {h.conversation_id for h in search(db, "zebra")} == {conv.id}

    repo.delete(conv.id)
    assert ids(repo.list_conversations()) == [other.id]
    assert search(db, "zebra") == []
    assert search(db, "zebras") == []  # the title too
    assert repo.get_conversation(conv.id).deleted  # still readable (undo)
    assert len(repo.active_path(conv.id).messages) == 2

    repo.restore(conv.id)
    assert set(ids(repo.list_conversations())) == {conv.id, other.id}
    assert not repo.get_conversation(conv.id).deleted
    hits = search(db, "zebra")
    assert {h.conversation_id for h in hits} == {conv.id}
    assert any(h.message_id is None for h in hits)  # title hit back too
    assert len([h for h in hits if h.message_id is not None]) == 2


def test_purge_deleted_removes_rows_and_messages(repo, db):
    gone = _chat_with_words(repo, "gone", "walrus")
    kept = _chat_with_words(repo, "kept", "walrus")
    repo.add_message(gone.id, "assistant", "a branch", parent_id=repo.active_path(gone.id).messages[0].id)
    repo.delete(gone.id)

    assert repo.purge_deleted() == 1
    with pytest.raises(NotFoundError):
        repo.get_conversation(gone.id)
    assert raw_count(db, "SELECT count(*) FROM conversations WHERE id = ?", gone.id) == 0
    assert raw_count(db, "SELECT count(*) FROM messages WHERE conversation_id = ?", gone.id) == 0
    assert raw_count(db, "SELECT count(*) FROM messages WHERE conversation_id = ?", kept.id) == 2
    repo.restore(kept.id)  # harmless on a live one
    assert repo.purge_deleted() == 0
    assert {h.conversation_id for h in search(db, "walrus")} == {kept.id}


def test_deleting_conversation_row_cascades_to_messages(repo, db):
    """The schema itself cascades (foreign keys are on), whatever code deletes the row."""
    conv = _chat_with_words(repo, "cascade", "otter")
    repo.add_message(conv.id, "user", "branch", parent_id=None)
    with db.begin() as s:
        s.connection().exec_driver_sql("DELETE FROM conversations WHERE id = ?", (conv.id,))
    assert raw_count(db, "SELECT count(*) FROM messages") == 0
    assert search(db, "otter") == []


def test_purge_deleted_respects_deleted_before(repo, db):
    old = repo.create_conversation("old")
    repo.add_message(old.id, "user", "old message")
    recent = repo.create_conversation("recent")
    repo.add_message(recent.id, "user", "recent message")
    repo.delete(old.id)
    repo.delete(recent.id)
    long_ago = datetime.now(timezone.utc) - timedelta(days=3)
    # backdate the first deletion as the app's next start-up would find it
    raw_exec(db, "UPDATE conversations SET deleted_at = ? WHERE id = ?",
             long_ago.strftime("%Y-%m-%d %H:%M:%S.%f"), old.id)

    cutoff = datetime.now(timezone.utc) - timedelta(days=1)
    assert repo.purge_deleted(deleted_before=cutoff) == 1
    with pytest.raises(NotFoundError):
        repo.get_conversation(old.id)
    assert raw_count(db, "SELECT count(*) FROM messages WHERE conversation_id = ?", old.id) == 0
    assert repo.get_conversation(recent.id).deleted
    assert len(repo.active_path(recent.id).messages) == 1
    assert repo.purge_deleted(deleted_before=cutoff) == 0
    assert repo.purge_deleted() == 1
    assert repo.list_conversations(include_deleted=True) == []


# ----- crash recovery -------------------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _set_owner(db, message_id: int, pid: int | None) -> None:
    raw_exec(db, "UPDATE messages SET owner_pid = ? WHERE id = ?", pid, message_id)


def test_recover_interrupted_marks_dead_writers_only(repo, db):
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "q")
    dead = repo.start_reply(conv.id)
    repo.checkpoint(dead.id, "dead writer's partial text", completion_tokens=4)
    orphan = repo.start_reply(conv.id, parent_id=dead.parent_id)
    repo.checkpoint(orphan.id, "no owner recorded")
    live = repo.start_reply(conv.id, parent_id=dead.parent_id)
    repo.checkpoint(live.id, "still being written")
    finished = repo.start_reply(conv.id, parent_id=dead.parent_id)
    repo.finish_reply(finished.id, "complete text")

    sleeper = subprocess.Popen(["sleep", "5"])
    try:
        _set_owner(db, dead.id, _dead_pid())
        _set_owner(db, orphan.id, None)
        _set_owner(db, live.id, sleeper.pid)

        assert repo.recover_interrupted() == 2

        d = repo.get_message(dead.id)
        assert d.status is MessageStatus.INTERRUPTED
        assert d.content == "dead writer's partial text"
        assert d.completion_tokens == 4
        o = repo.get_message(orphan.id)
        assert o.status is MessageStatus.INTERRUPTED
        assert o.content == "no owner recorded"
        alive = repo.get_message(live.id)
        assert alive.status is MessageStatus.STREAMING
        assert alive.content == "still being written"
        assert repo.get_message(finished.id).status is MessageStatus.COMPLETE
        # the live writer can go on
        repo.checkpoint(live.id, "still being written, more")
        assert repo.recover_interrupted() == 0
    finally:
        sleeper.kill()
        sleeper.wait()
    # an interrupted message is no longer streaming
    with pytest.raises(StorageError):
        repo.checkpoint(dead.id, "too late")


def test_recover_interrupted_treats_own_pid_as_stale(repo):
    """At start-up nothing of this process streams yet: its own pid is a leftover."""
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "q")
    reply = repo.start_reply(conv.id)  # owner_pid = this process
    repo.checkpoint(reply.id, "partial")
    assert repo.recover_interrupted() == 1
    got = repo.get_message(reply.id)
    assert got.status is MessageStatus.INTERRUPTED
    assert got.content == "partial"


def test_records_are_plain_and_frozen(repo):
    conv = repo.create_conversation("chat")
    msg = repo.add_message(conv.id, "user", "hi")
    with pytest.raises(dataclasses.FrozenInstanceError):
        msg.content = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        conv.title = "changed"  # type: ignore[misc]
    assert type(msg).__module__ == "storage.records"
    assert type(repo.active_path(conv.id)).__module__ == "storage.records"


def test_copy_active_path_makes_a_standalone_chat_of_one_branch(repo, catalog):
    conv = repo.create_conversation("pane", model_ref="m.gguf", sampling={"temperature": 0.2})
    catalog.create_comparison("cmp", [conv.id])
    repo.add_message(conv.id, "system", "be brief")
    user = repo.add_message(conv.id, "user", "hi")
    repo.add_message(conv.id, "assistant", "old answer", completion_tokens=2)
    kept = repo.add_message(conv.id, "assistant", "new answer", parent_id=user.id, ttft_s=0.2)
    streaming = repo.start_reply(conv.id)
    copy = repo.copy_active_path(conv.id, title="continued")
    assert copy.id != conv.id and copy.comparison_id is None
    assert (copy.title, copy.model_ref, copy.sampling) == ("continued", "m.gguf", {"temperature": 0.2})
    path = repo.active_path(copy.id)
    assert [(m.role, m.content) for m in path.messages] == [
        ("system", "be brief"), ("user", "hi"), ("assistant", "new answer"), ("assistant", "")]
    assert path.messages[2].ttft_s == 0.2
    assert path.messages[-1].status is MessageStatus.INTERRUPTED  # nobody writes the copy
    assert all(m.conversation_id == copy.id for m in path.messages)
    # The original keeps its branches and its streaming reply.
    assert len(repo.siblings(kept.id)) == 2
    assert repo.get_message(streaming.id).status is MessageStatus.STREAMING
    assert repo.get_conversation(conv.id).comparison_id is not None


# ----- the system prompt and continued replies -----------------------------------------------


def test_set_system_prompt_changes_adds_and_removes_the_root_of_every_branch(repo):
    conv = repo.create_conversation()
    user = repo.add_message(conv.id, "user", "hi")
    repo.edit_message(user.id, "hello")  # a second root: both branches get the system prompt
    repo.set_system_prompt(conv.id, "Be brief.")
    path = repo.active_path(conv.id)
    assert [(m.role, m.content) for m in path.messages] == [("system", "Be brief."), ("user", "hello")]
    repo.switch_to(user.id)
    assert repo.active_path(conv.id).messages[0].content == "Be brief."
    repo.set_system_prompt(conv.id, "Be verbose.")
    assert [m.content for m in repo.active_path(conv.id).messages] == ["Be verbose.", "hi"]
    repo.set_system_prompt(conv.id, "")
    assert [m.role for m in repo.active_path(conv.id).messages] == ["user"]
    empty = repo.create_conversation()
    repo.set_system_prompt(empty.id, "Only this.")
    assert [m.content for m in repo.active_path(empty.id).messages] == ["Only this."]


def test_system_prompt_sharers_counts_other_live_chats_with_the_same_prompt(repo):
    chats = [repo.create_conversation() for _ in range(4)]
    for conv in chats[:3]:
        repo.set_system_prompt(conv.id, "Shared.")
    repo.set_system_prompt(chats[3].id, "Own.")
    assert repo.system_prompt_sharers(chats[0].id, "Shared.") == 2
    repo.delete(chats[1].id)
    assert repo.system_prompt_sharers(chats[0].id, "Shared.") == 1
    assert repo.system_prompt_sharers(chats[3].id, "Own.") == 0


def test_resume_reply_reopens_a_finished_reply_for_more_text(repo):
    conv = repo.create_conversation()
    repo.add_message(conv.id, "user", "count")
    reply = repo.start_reply(conv.id)
    with pytest.raises(StorageError):
        repo.resume_reply(reply.id)  # still streaming
    repo.finish_reply(reply.id, "1 2 3", completion_tokens=3)
    resumed = repo.resume_reply(reply.id)
    assert resumed.status is MessageStatus.STREAMING and resumed.content == "1 2 3"
    repo.finish_reply(reply.id, "1 2 3 4 5", completion_tokens=5)
    assert repo.get_message(reply.id).content == "1 2 3 4 5"
    assert len(repo.active_path(conv.id).messages) == 2


# ----- deleting one message, branching a chat up to one (issue 27, hover actions) ------------


def test_delete_message_takes_its_replies_in_every_branch_and_keeps_the_rest(repo, db):
    conv = repo.create_conversation()
    q1 = repo.add_message(conv.id, "user", "first question")
    a1 = repo.add_message(conv.id, "assistant", "first answer")
    q2 = repo.add_message(conv.id, "user", "second question")
    a2 = repo.add_message(conv.id, "assistant", "an answer about zebras")
    other = repo.add_message(conv.id, "assistant", "another answer", parent_id=q2.id)
    assert repo.replies_under(q2.id) == 2 and repo.replies_under(other.id) == 0
    assert repo.delete_message(other.id) == 1  # a leaf alone; the branch on screen falls back
    path = repo.active_path(conv.id)
    assert ids(path.messages) == [q1.id, a1.id, q2.id, a2.id] and path.branches == {}
    assert repo.delete_message(q2.id) == 2  # the question and its answer
    assert ids(repo.active_path(conv.id).messages) == [q1.id, a1.id]
    assert raw_count(db, "SELECT count(*) FROM messages WHERE conversation_id = ?", conv.id) == 2
    assert not search(db, "zebras")  # the search index lost it too
    assert repo.delete_message(q1.id) == 2
    assert repo.active_path(conv.id).messages == []
    with pytest.raises(NotFoundError):
        repo.delete_message(q1.id)


def test_deleting_a_branch_off_screen_leaves_the_branch_on_screen(repo):
    conv = repo.create_conversation()
    q = repo.add_message(conv.id, "user", "q")
    old = repo.add_message(conv.id, "assistant", "old")
    new = repo.add_message(conv.id, "assistant", "new", parent_id=q.id)
    assert repo.delete_message(old.id) == 1
    assert ids(repo.active_path(conv.id).messages) == [q.id, new.id]


def test_copy_active_path_up_to_a_message_holds_the_branch_down_to_it(repo):
    conv = repo.create_conversation("source")
    q1 = repo.add_message(conv.id, "user", "q1")
    a1 = repo.add_message(conv.id, "assistant", "a1")
    repo.add_message(conv.id, "user", "q2")
    copy = repo.copy_active_path(conv.id, title="branch", up_to=a1.id)
    assert [m.content for m in repo.active_path(copy.id).messages] == ["q1", "a1"]
    assert [m.content for m in repo.active_path(conv.id).messages] == ["q1", "a1", "q2"]
    stranger = repo.create_conversation()
    with pytest.raises(StorageError):
        repo.copy_active_path(stranger.id, up_to=q1.id)
