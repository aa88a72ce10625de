"""The server's stored Responses as conversations (storage/responses.py): a response opens an
"api" conversation or adds a branch under the reply it continues; read back as saved,
deleted, listed apart from the user's chats and never searched or exported with them."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from datetime import datetime, timezone

import pytest
from sqlalchemy import event

from storage import (
    API_ORIGIN,
    CHAT_ORIGIN,
    ChatRepository,
    NotFoundError,
    ResponseRecord,
    ResponsesRepository,
    open_database,
    search,
)
from storage.chat_file_format import export_json

USAGE = {"input_tokens": 3, "output_tokens": 2}


def record(rid: str, text: str = "hi \u00e9", previous: str | None = None, output: str = "Hello!") -> ResponseRecord:
    return ResponseRecord(id=rid, model="m", input=[{"role": "user", "content": text}], output_text=output,
                          status="incomplete", usage=USAGE, previous_response_id=previous)


@pytest.fixture
def db(tmp_path):
    database = open_database(tmp_path / "chorus.db")
    yield database
    database.close()


def rows(db) -> tuple[int, int]:
    with sqlite3.connect(db.path) as conn:
        return (conn.execute("SELECT count(*) FROM messages").fetchone()[0],
                conn.execute("SELECT count(*) FROM conversations").fetchone()[0])


def test_a_response_reads_back_as_saved_and_one_that_continues_it_as_its_own_turns(db):
    repo = ResponsesRepository(db)
    repo.save(record("resp_a"), title="hi")
    repo.save(record("resp_b", "And you?", previous="resp_a", output="Fine."))
    got = repo.get("resp_b")
    assert got is not None and got.created_at is not None
    assert (got.input, got.output_text, got.status, got.usage, got.previous_response_id) == (
        [{"role": "user", "content": "And you?"}], "Fine.", "incomplete", USAGE, "resp_a")
    assert repo.conversation("resp_b") == [
        {"role": "user", "content": "hi \u00e9"}, {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "And you?"}, {"role": "assistant", "content": "Fine."}]
    assert repo.get("resp_zz") is None and repo.conversation("resp_zz") is None


def test_two_responses_continuing_one_are_two_branches_of_its_conversation(db):
    repo = ResponsesRepository(db)
    repo.save(record("resp_a"), title="hi")
    repo.save(record("resp_b", "Left?", previous="resp_a"))
    repo.save(record("resp_c", "Right?", previous="resp_a"))
    assert rows(db) == (6, 1)
    assert [t["content"] for t in repo.conversation("resp_c") or []] == ["hi \u00e9", "Hello!", "Right?", "Hello!"]


def test_a_turn_with_an_image_keeps_its_parts_and_its_conversation_is_not_listed_found_or_exported(db):
    turn = {"role": "user", "content": [{"type": "text", "text": "What heron is this?"},
                                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}
    repo = ResponsesRepository(db)
    repo.save(replace(record("resp_i"), input=[turn]), title="What heron")
    assert repo.conversation("resp_i") == [turn, {"role": "assistant", "content": "Hello!"}]
    chats = ChatRepository(db)
    chats.add_message(chats.create_conversation("Birds").id, "user", "a heron at the lake")
    assert [c.title for c in chats.list_conversations()] == ["Birds"]  # the API's conversations are listed apart
    assert {hit.conversation_title for hit in search(db, "heron")} == {"Birds"}  # nor found
    assert [c["title"] for c in export_json(db)["conversations"]] == ["Birds"]  # nor exported


def test_a_response_nothing_continues_is_deleted_with_its_turns_and_its_empty_conversation(db):
    repo = ResponsesRepository(db)
    repo.save(record("resp_a"), title="hi")
    repo.save(record("resp_b", previous="resp_a"))
    assert repo.delete("resp_b") is True and rows(db) == (2, 1)
    assert repo.delete("resp_b") is False
    assert repo.get("resp_a") is not None
    assert repo.delete("resp_a") is True and rows(db) == (0, 0)


def test_a_response_others_continue_loses_its_id_only_and_goes_with_the_last_of_them(db):
    repo = ResponsesRepository(db)
    repo.save(record("resp_a"), title="hi")
    repo.save(record("resp_b", previous="resp_a"))
    repo.save(record("resp_c", previous="resp_a"))
    assert repo.delete("resp_a") is True
    assert repo.get("resp_a") is None and repo.conversation("resp_a") is None
    assert repo.get("resp_b") is not None and len(repo.conversation("resp_b") or []) == 4  # still readable
    assert repo.delete("resp_b") is True and rows(db) == (4, 1)
    assert repo.delete("resp_c") is True and rows(db) == (0, 0)  # a's turns went with the last


def test_continuing_a_response_deleted_meanwhile_is_not_found_and_writes_nothing(db):
    repo = ResponsesRepository(db)
    repo.save(record("resp_a"), title="hi")
    repo.delete("resp_a")
    with pytest.raises(NotFoundError):
        repo.save(record("resp_b", previous="resp_a"))
    assert rows(db) == (0, 0)


def test_a_response_keeps_the_moment_it_was_answered_with(db):
    """Once the save's own time: a reply that took 3 s under load read back 3 s late."""
    repo = ResponsesRepository(db)
    answered = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    repo.save(replace(record("resp_t"), created_at=answered), title="t")
    got = repo.get("resp_t")
    assert got is not None and got.created_at == answered


def test_the_api_conversations_are_listed_apart_newest_first_and_counted(db):
    repo, chats = ResponsesRepository(db), ChatRepository(db)
    for n in range(3):
        repo.save(record(f"resp_{n}", f"question {n}"), title=f"question {n}")
    repo.save(record("resp_more", previous="resp_0"))  # continuing the first makes it the newest
    listed = chats.list_conversations(origin=API_ORIGIN, limit=2)
    assert [c.title for c in listed] == ["question 0", "question 2"]
    assert {c.origin for c in listed} == {API_ORIGIN}
    assert chats.count_conversations(API_ORIGIN) == 3 and chats.count_conversations() == 0
    assert len(chats.list_conversations(origin=None)) == 3


def test_the_api_conversations_are_searched_only_when_asked_for_and_say_so(db):
    """The sidebar searches both kinds (and marks the API's hits); export and the other
    callers keep to the chats, as before."""
    repo, chats = ResponsesRepository(db), ChatRepository(db)
    repo.save(record("resp_a", "where do herons nest?", output="In colonies, herons nest high."), title="herons")
    chat = chats.create_conversation("birds")
    chats.add_message(chat.id, "user", "Do herons migrate?")
    assert {h.origin for h in search(db, "herons")} == {CHAT_ORIGIN}
    both = search(db, "herons", origin=None)
    assert {(h.origin, h.message_id is None) for h in both} == {
        (CHAT_ORIGIN, False), (API_ORIGIN, False), (API_ORIGIN, True)}  # the API's title matched too
    assert {h.origin for h in search(db, "colonies", origin=API_ORIGIN)} == {API_ORIGIN}


def test_a_conversation_deleted_in_the_window_hides_its_responses_until_restored(db):
    """The sidebar's delete is a soft one: the API must not go on serving (or continuing)
    what the user deleted; an undo brings it back."""
    repo, chats = ResponsesRepository(db), ChatRepository(db)
    repo.save(record("resp_a"), title="hi")
    conv = chats.list_conversations(origin=API_ORIGIN)[0]
    chats.delete(conv.id)
    assert repo.get("resp_a") is None and repo.conversation("resp_a") is None
    with pytest.raises(NotFoundError):
        repo.save(record("resp_b", previous="resp_a"))
    assert repo.delete("resp_a") is False
    chats.restore(conv.id)
    assert repo.get("resp_a") is not None and rows(db) == (2, 1)


def test_a_long_conversation_is_read_in_queries_that_do_not_grow_with_it(db):
    """Walking up one parent a query took 0.2 s at 300 turns, on every request that
    continued the conversation (storage/branches.py: one recursive query)."""
    repo = ResponsesRepository(db)
    previous = None
    for n in range(40):
        repo.save(record(f"resp_{n}", f"turn {n}", previous=previous), title="t")
        previous = f"resp_{n}"
    statements: list[str] = []
    event.listen(db.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))

    def queries(read) -> int:
        statements.clear()
        read()
        return len(statements)

    short, long = queries(lambda: repo.conversation("resp_4")), queries(lambda: repo.conversation("resp_39"))
    assert len(repo.conversation("resp_39") or []) == 80
    assert short == long <= 3
    assert queries(lambda: repo.get("resp_4")) == queries(lambda: repo.get("resp_39"))
