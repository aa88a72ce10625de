"""Documents attached to messages, on a real SQLite file: stored once by sha256, carried by
edits and copies, removed with the last message attaching them; DocumentRepository's reads,
retrieval (bm25 over chunks) and a reply's sources."""

from __future__ import annotations

import dataclasses
import re
import sqlite3

import pytest

from storage import DocumentRepository, NotFoundError, SourceRecord, StorageError
from tests.support.documents import chunk_texts, new_document

BIRDS = ("Penguins live in Antarctica and eat krill.\n\n"
         "Puffins nest on cliffs of the north Atlantic.\n\n"
         "Albatrosses glide over the southern ocean for days.")
TRAINS = "The night train leaves at nine.\n\nSleeper cabins hold two berths."


@pytest.fixture
def docs(db):
    return DocumentRepository(db)


def count(db, table: str) -> int:
    with sqlite3.connect(db.path) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def stored(db) -> tuple[int, int, int, int]:
    """(documents, chunks, chunks in the search index, attachments)."""
    return (count(db, "documents"), count(db, "document_chunks"), count(db, "document_chunks_fts"),
            count(db, "message_attachments"))


# ----- attaching ----------------------------------------------------------------------------


def test_a_message_with_documents_lists_them_on_its_path(repo, docs):
    birds, trains = new_document(BIRDS, "birds.txt", paged=True), new_document(TRAINS, "trains.md")
    conv = repo.create_conversation("reading")
    question = repo.add_message(conv.id, "user", "Compare these", documents=[birds, trains])
    answer = repo.add_message(conv.id, "assistant", "Birds and trains.")
    path = repo.active_path(conv.id)
    assert list(path.attachments) == [question.id]  # a message without any is not listed
    first, second = path.attachments[question.id]
    assert (first.position, first.name, first.sha256, first.pages, first.chars) == (
        0, "birds.txt", birds.sha256, 3, len(BIRDS))
    assert (second.position, second.name, second.mime, second.size_bytes) == (
        1, "trains.md", "text/plain", len(TRAINS))
    assert answer.id not in path.attachments
    record = docs.document(birds.sha256)
    assert (record.text, record.chunks, record.name, record.pages) == (BIRDS, birds.chunks, "birds.txt", 3)
    assert chunk_texts(record.text, record.chunks)[1] == "Puffins nest on cliffs of the north Atlantic."


def test_a_document_is_stored_once_and_never_rewritten(repo, docs, db):
    birds = new_document(BIRDS, "birds.txt")
    renamed = dataclasses.replace(birds, name="copy of birds.txt", text="other text", chunks=())
    one, two = repo.create_conversation("one"), repo.create_conversation("two")
    repo.add_message(one.id, "user", "a", documents=[birds])
    message = repo.add_message(two.id, "user", "b", documents=[renamed, birds])
    assert stored(db) == (1, 3, 3, 3)
    # each attachment keeps its own name; the document keeps its first text and name
    assert [a.name for a in repo.active_path(two.id).attachments[message.id]] == ["copy of birds.txt", "birds.txt"]
    assert (docs.document(birds.sha256).text, docs.document(birds.sha256).name) == (BIRDS, "birds.txt")


SHORT = new_document("short")
SPAN = SHORT.chunks[0]


@pytest.mark.parametrize("bad, words", [
    (dataclasses.replace(SHORT, sha256="ABC"), "sha256 'ABC'"),
    (dataclasses.replace(SHORT, sha256="F" * 64), "64 lowercase"),
    (dataclasses.replace(SHORT, chunks=(SPAN, dataclasses.replace(SPAN, end=99))),
     "chunk 2 (0..99) is outside the text (5 characters)"),
    (dataclasses.replace(SHORT, chunks=(dataclasses.replace(SPAN, start=4, end=3),)), "chunk 1 (4..3)"),
    (dataclasses.replace(SHORT, chunks=(dataclasses.replace(SPAN, page=0),)), "page 0"),
    (dataclasses.replace(SHORT, size_bytes=-1), "0 or more"),
])
def test_a_bad_document_stores_nothing(repo, db, bad, words):
    conv = repo.create_conversation("chat")
    good = new_document(TRAINS)
    with pytest.raises(StorageError, match=re.escape(words)) as caught:
        repo.add_message(conv.id, "user", "look", documents=[good, bad])
    assert "nothing was stored" in str(caught.value)
    assert repo.active_path(conv.id).messages == []
    assert stored(db) == (0, 0, 0, 0)


def test_a_failure_midway_stores_none_of_the_message(repo, db):
    """The attachments' insert fails after the message and the documents were written: the
    transaction takes all three back (a real SQLite trigger makes it fail)."""
    conv = repo.create_conversation("chat")
    with sqlite3.connect(db.path) as conn:
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON message_attachments "
                     "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    with pytest.raises(Exception, match="refused"):
        repo.add_message(conv.id, "user", "look", documents=[new_document(BIRDS)])
    assert repo.active_path(conv.id).messages == []
    assert stored(db) == (0, 0, 0, 0)
    assert repo.get_conversation(conv.id).active_message_id is None


def test_a_chat_started_with_a_document_is_all_or_nothing(repo, db):
    """start_conversation: the chat, its system prompt, the message and its document in one
    transaction; the attachments' insert failing (a trigger) leaves no empty chat behind."""
    conv, message = repo.start_conversation([("system", "Be brief."), ("user", "look")], [new_document(BIRDS)],
                                            title="look", title_provisional=True, model_ref="m.gguf")
    path = repo.active_path(conv.id)
    assert [(m.role, m.content) for m in path.messages] == [("system", "Be brief."), ("user", "look")]
    assert path.messages[-1].id == message.id
    assert [a.name for a in path.attachments[message.id]] == ["notes.txt"]
    assert (conv.title, conv.title_provisional, conv.model_ref) == ("look", True, "m.gguf")
    with sqlite3.connect(db.path) as conn:
        conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON message_attachments "
                     "BEGIN SELECT RAISE(ABORT, 'refused'); END")
    with pytest.raises(Exception, match="refused"):
        repo.start_conversation([("user", "again")], [new_document(TRAINS)])
    assert [c.id for c in repo.list_conversations()] == [conv.id]
    assert stored(db) == (1, 3, 3, 1)


def test_an_edit_carries_the_documents_to_the_new_sibling(repo, db):
    conv = repo.create_conversation("chat")
    question = repo.add_message(conv.id, "user", "Summarise", documents=[new_document(BIRDS, "b.txt"),
                                                                          new_document(TRAINS, "t.txt")])
    repo.add_message(conv.id, "assistant", "Done.")
    edited = repo.edit_message(question.id, "Summarise briefly")
    path = repo.active_path(conv.id)
    assert [m.id for m in path.messages] == [edited.id]
    assert [(a.position, a.name) for a in path.attachments[edited.id]] == [(0, "b.txt"), (1, "t.txt")]
    assert stored(db)[0] == 2  # the same documents, attached twice
    repo.switch_to(question.id)
    assert [a.name for a in repo.active_path(conv.id).attachments[question.id]] == ["b.txt", "t.txt"]


def test_branching_into_a_new_chat_copies_attachments_and_sources(repo, docs, db):
    birds = new_document(BIRDS, "birds.txt")
    conv = repo.create_conversation("chat")
    question = repo.add_message(conv.id, "user", "Where do puffins nest?", documents=[birds])
    answer = repo.add_message(conv.id, "assistant", "On cliffs [1].")
    source = SourceRecord(1, birds.sha256, "birds.txt", 1, None, True)
    docs.set_sources(answer.id, [source])
    copy = repo.copy_active_path(conv.id)
    path = repo.active_path(copy.id)
    new_question, new_answer = path.messages
    assert new_question.id != question.id
    assert [a.name for a in path.attachments[new_question.id]] == ["birds.txt"]
    assert new_answer.sources == (source,)
    assert stored(db)[:3] == (1, 3, 3)  # rows that point at the one document, not a copy of it


# ----- deleting ---------------------------------------------------------------------------


def test_deleting_the_last_message_attaching_a_document_removes_it(repo, db):
    conv = repo.create_conversation("chat")
    first = repo.add_message(conv.id, "user", "one", documents=[new_document(BIRDS), new_document(TRAINS)])
    repo.add_message(conv.id, "assistant", "ok")
    repo.add_message(conv.id, "user", "two", documents=[new_document(TRAINS)])
    assert stored(db) == (2, 5, 5, 3)
    repo.delete_message(first.id)  # and the messages after it: both attachments of TRAINS go
    assert stored(db) == (0, 0, 0, 0)


def test_a_document_another_chat_or_message_attaches_stays(repo, docs, db):
    birds = new_document(BIRDS)
    one, two = repo.create_conversation("one"), repo.create_conversation("two")
    kept_here = repo.add_message(one.id, "user", "keep", documents=[birds], parent_id=None)
    deleted_here = repo.add_message(one.id, "user", "other branch", documents=[birds], parent_id=None)
    elsewhere = repo.add_message(two.id, "user", "elsewhere", documents=[birds])
    repo.delete_message(deleted_here.id)
    repo.delete_message(kept_here.id)
    assert stored(db) == (1, 3, 3, 1)
    assert docs.document(birds.sha256).text == BIRDS
    repo.delete_message(elsewhere.id)
    assert stored(db) == (0, 0, 0, 0)


def test_a_deleted_chat_keeps_its_documents_until_it_is_purged(repo, docs, db):
    birds, trains = new_document(BIRDS), new_document(TRAINS)
    gone, other = repo.create_conversation("gone"), repo.create_conversation("other")
    message = repo.add_message(gone.id, "user", "a", documents=[birds, trains])
    repo.add_message(other.id, "user", "b", documents=[trains])
    repo.delete(gone.id)
    assert stored(db) == (2, 5, 5, 3)
    repo.restore(gone.id)
    assert len(repo.active_path(gone.id).attachments[message.id]) == 2
    repo.delete(gone.id)
    assert repo.purge_deleted() == 1
    assert stored(db) == (1, 2, 2, 1)
    assert docs.document(trains.sha256).text == TRAINS
    with pytest.raises(NotFoundError):
        docs.document(birds.sha256)


# ----- DocumentRepository -----------------------------------------------------------------


def test_store_is_idempotent_and_purge_unused_removes_what_nothing_attaches(repo, docs, db):
    birds, trains = new_document(BIRDS, "birds.txt"), new_document(TRAINS)
    first = docs.store(birds)
    again = docs.store(dataclasses.replace(birds, name="renamed.txt"))
    assert first == again and first.name == "birds.txt" and first.chunks == birds.chunks
    docs.store(trains)
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "a", documents=[trains])
    assert stored(db) == (2, 5, 5, 1)
    assert docs.purge_unused() == 1
    assert stored(db) == (1, 2, 2, 1)
    assert docs.purge_unused() == 0
    with pytest.raises(StorageError, match="outside the text"):
        docs.store(dataclasses.replace(birds, chunks=(dataclasses.replace(birds.chunks[0], start=-1),)))
    assert stored(db)[0] == 1


def test_document_not_found(docs):
    with pytest.raises(NotFoundError, match="no document"):
        docs.document("0" * 64)


def test_best_chunks_match_any_of_the_questions_words(docs):
    birds, trains = docs.store(new_document(BIRDS)), docs.store(new_document(TRAINS))
    # "penguins" and "krill" are in one chunk, "eat" nowhere else, the rest nowhere at all
    hits = docs.best_chunks([birds.sha256], "Which penguins eat krill, and why?", 5)
    assert chunk_texts(BIRDS, hits) == ["Penguins live in Antarctica and eat krill."]
    assert (hits[0].sha256, hits[0].index, hits[0].chunk) == (birds.sha256, 0, birds.chunks[0])
    # best first: the chunk with two of the words before those with one
    hits = docs.best_chunks([birds.sha256, trains.sha256], "southern ocean train", 5)
    assert [(h.sha256, h.index) for h in hits] == [(birds.sha256, 2), (trains.sha256, 0)]
    assert hits[0].rank < hits[1].rank
    # only the documents asked for, at most limit
    assert [h.sha256 for h in docs.best_chunks([trains.sha256], "southern ocean train", 5)] == [trains.sha256]
    assert len(docs.best_chunks([birds.sha256], "penguins puffins albatrosses", 2)) == 2


def test_best_chunks_without_words_or_documents_is_empty(docs):
    birds = docs.store(new_document(BIRDS))
    assert docs.best_chunks([birds.sha256], "?! ...", 5) == []
    assert docs.best_chunks([], "penguins", 5) == []
    assert docs.best_chunks([birds.sha256], "penguins", 0) == []
    # a question of common words only still asks for them
    assert chunk_texts(BIRDS, docs.best_chunks([birds.sha256], "the", 5)) == [
        "Puffins nest on cliffs of the north Atlantic.", "Albatrosses glide over the southern ocean for days."]


def test_a_quote_in_the_question_is_no_fts_syntax(docs):
    birds = docs.store(new_document(BIRDS))
    assert len(docs.best_chunks([birds.sha256], 'say "krill" OR NEAR(', 5)) == 1


def test_sources_are_kept_on_the_reply(repo, docs):
    birds = new_document(BIRDS, "birds.txt", paged=True)
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "Where?", documents=[birds])
    answer = repo.add_message(conv.id, "assistant", "In Antarctica [1].")
    sources = [SourceRecord(1, birds.sha256, "birds.txt", 0, 1, True),
               SourceRecord(2, birds.sha256, "birds.txt", 2, 3, False)]
    docs.set_sources(answer.id, sources)
    assert repo.active_path(conv.id).messages[-1].sources == tuple(sources)
    assert repo.get_message(answer.id).sources == tuple(sources)
    docs.set_sources(answer.id, [])
    assert repo.get_message(answer.id).sources == ()
    with pytest.raises(NotFoundError):
        docs.set_sources(answer.id + 100, sources)


def test_conversation_documents_lists_each_once_first_attachment_first(repo, docs):
    birds, trains = new_document(BIRDS, "birds.txt"), new_document(TRAINS, "trains.txt")
    conv, other = repo.create_conversation("chat"), repo.create_conversation("other")
    first = repo.add_message(conv.id, "user", "one", documents=[trains])
    repo.add_message(conv.id, "user", "two", documents=[new_document(BIRDS, "again.txt"), trains])
    repo.add_message(conv.id, "user", "another branch", documents=[birds], parent_id=None)
    repo.add_message(other.id, "user", "elsewhere", documents=[new_document("only there")])
    listed = docs.conversation_documents(conv.id)
    assert [(a.name, a.message_id) for a in listed] == [("trains.txt", first.id), ("again.txt", first.id + 1)]
    assert docs.conversation_documents(repo.create_conversation("empty").id) == []
    with pytest.raises(NotFoundError):
        docs.conversation_documents(9999)


def test_the_index_holds_each_chunks_own_slice_after_wide_characters(docs, db):
    """The search index is written from Python's slices (code points), as the old trigger's
    substr counted characters: a chunk after emoji and accents is found by its own words."""
    text = "Café 🐧🐧 déjà vu.\n\nÜber-fast zebras gallop.\n\nQuiet owls hoot."
    doc = docs.store(new_document(text))
    hits = docs.best_chunks([doc.sha256], "zebras", 5)
    assert chunk_texts(text, hits) == ["Über-fast zebras gallop."]
    with sqlite3.connect(db.path) as conn:
        indexed = [row[0] for row in conn.execute("SELECT text FROM document_chunks_fts ORDER BY rowid")]
    assert indexed == [text[c.start:c.end] for c in doc.chunks]


def test_storing_a_chunk_reads_no_document_text_back(db):
    """Revision 0010: no trigger copies each chunk out of the stored document (that read the
    whole text once per chunk: minutes for a 50 MB file)."""
    with sqlite3.connect(db.path) as conn:
        triggers = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert "document_chunks_fts_ai" not in triggers
    assert "document_chunks_fts_ad" in triggers  # deleting a chunk still takes it out of the index
