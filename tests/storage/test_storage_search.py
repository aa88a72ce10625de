"""FTS5 search over messages, titles and attached documents, on a real SQLite file."""

from __future__ import annotations

import dataclasses

import pytest

from storage import SearchHit, matching_messages, search
from tests.support.documents import new_document


def message_hits(hits: list[SearchHit]) -> list[SearchHit]:
    return [h for h in hits if h.message_id is not None]


def highlighted(hit: SearchHit) -> list[str]:
    return [text for text, marked in hit.snippet if marked]


def test_ranked_by_relevance(repo, db):
    conv = repo.create_conversation("fruit talk")
    once = repo.add_message(conv.id, "user", "a pear and a plum and one mango here")
    many = repo.add_message(conv.id, "assistant", "mango mango mango and mango again")
    hits = message_hits(search(db, "mango"))
    assert [h.message_id for h in hits] == [many.id, once.id]
    assert hits[0].rank < hits[1].rank  # bm25: lower is better, best first
    assert hits[0].role == "assistant" and hits[1].role == "user"
    assert all(h.conversation_id == conv.id and h.conversation_title == "fruit talk" for h in hits)

    # inserted the other way round: order by rank, not by id
    conv2 = repo.create_conversation("veg")
    many2 = repo.add_message(conv2.id, "user", "kale kale kale kale salad")
    once2 = repo.add_message(conv2.id, "user", "some kale with rice and beans and salt")
    assert [h.message_id for h in message_hits(search(db, "kale"))] == [many2.id, once2.id]


def test_snippet_highlights_matches(repo, db):
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "The quick brown fox jumps over the lazy dog")
    (hit,) = message_hits(search(db, "fox"))
    assert highlighted(hit) == ["fox"]
    assert hit.snippet_text == "The quick brown fox jumps over the lazy dog"
    assert ("fox", True) in hit.snippet
    assert all(not marked for text, marked in hit.snippet if text != "fox")
    assert "\ue000" not in hit.snippet_text and "\ue001" not in hit.snippet_text


def test_snippet_of_long_message_is_short_and_marks_each_match(repo, db):
    conv = repo.create_conversation("chat")
    filler = " ".join(f"word{i}" for i in range(200))
    repo.add_message(conv.id, "assistant", f"{filler} needle needle {filler}")
    (hit,) = message_hits(search(db, "needle"))
    assert highlighted(hit) == ["needle", "needle"]
    assert len(hit.snippet_text) < 200
    assert "…" in hit.snippet_text


def test_title_hits(repo, db):
    conv = repo.create_conversation("Holiday plans in Portugal")
    repo.add_message(conv.id, "user", "nothing relevant in here")
    hits = search(db, "portugal")
    assert len(hits) == 1
    (hit,) = hits
    assert hit.message_id is None and hit.role is None
    assert hit.conversation_id == conv.id
    assert highlighted(hit) == ["Portugal"]
    assert hit.snippet_text == "Holiday plans in Portugal"
    # a renamed title is re-indexed
    repo.rename(conv.id, "Weekend in Spain")
    assert search(db, "portugal") == []
    assert [h.conversation_id for h in search(db, "spain")] == [conv.id]


def test_titles_and_messages_together_titles_first(repo, db):
    conv = repo.create_conversation("Rust questions")
    msg = repo.add_message(conv.id, "user", "How do lifetimes work in Rust?")
    hits = search(db, "rust")
    assert [(h.conversation_id, h.message_id) for h in hits] == [(conv.id, None), (conv.id, msg.id)]
    # titles come only on the first page
    assert [h.message_id for h in search(db, "rust", offset=1)] == []
    assert [h.message_id for h in search(db, "rust", offset=0, limit=5)] == [None, msg.id]


def test_prefix_match_on_last_word_only(repo, db):
    conv = repo.create_conversation("chat")
    msg = repo.add_message(conv.id, "user", "international cooperation matters")
    assert [h.message_id for h in search(db, "internat")] == [msg.id]
    assert [h.message_id for h in search(db, "international coop")] == [msg.id]
    # only the last word is a prefix: an unfinished earlier word does not match
    assert search(db, "internat cooperation") == []


def test_multiple_words_must_all_match(repo, db):
    conv = repo.create_conversation("chat")
    both = repo.add_message(conv.id, "user", "red apples and green pears")
    repo.add_message(conv.id, "user", "red cars only")
    repo.add_message(conv.id, "user", "green pears only")
    assert [h.message_id for h in search(db, "red pears")] == [both.id]
    assert [h.message_id for h in search(db, "pears red")] == [both.id]  # any order
    assert {h.message_id for h in search(db, "red")} == {both.id, both.id + 1}


@pytest.mark.parametrize(
    "query",
    ['foo" OR bar', "*", "NEAR(", "NEAR(a b", '"', '""', "AND", "OR NOT", "-", "^foo", "a:b",
     "foo)", "(((", "'", "col:foo*", "foo* *bar", "{a b}", "\\", "%", "; DROP TABLE messages; --"],
)
def test_user_punctuation_never_raises(repo, db, query):
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "foo bar near and or not")
    hits = search(db, query)
    assert isinstance(hits, list)
    assert search(db, "foo")  # and the table is intact


def test_quotes_and_operators_are_plain_words(repo, db):
    conv = repo.create_conversation("chat")
    foo_bar = repo.add_message(conv.id, "user", "foo or bar together")
    repo.add_message(conv.id, "user", "only bar here")
    # 'foo" OR bar' is the words foo, or, bar (all required), not an FTS OR
    assert [h.message_id for h in search(db, 'foo" OR bar')] == [foo_bar.id]
    assert [h.message_id for h in search(db, "NEAR(foo")] == []  # "near" is a plain word here


@pytest.mark.parametrize("query", ["", "   ", "?!", "***", "\"'"])
def test_no_words_gives_no_results(repo, db, query):
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "anything")
    assert search(db, query) == []


def test_other_branches_are_found(repo, db):
    conv = repo.create_conversation("chat")
    user = repo.add_message(conv.id, "user", "write a poem")
    old = repo.add_message(conv.id, "assistant", "roses are crimson")
    new = repo.add_message(conv.id, "assistant", "violets are azure", parent_id=user.id)
    assert repo.get_conversation(conv.id).active_message_id == new.id
    assert [h.message_id for h in search(db, "crimson")] == [old.id]
    assert [h.message_id for h in search(db, "azure")] == [new.id]


def test_deleted_conversations_are_excluded(repo, db):
    keep = repo.create_conversation("keep")
    drop = repo.create_conversation("drop otter")
    kept = repo.add_message(keep.id, "user", "otter facts")
    repo.add_message(drop.id, "user", "otter facts too")
    repo.delete(drop.id)
    assert [(h.conversation_id, h.message_id) for h in search(db, "otter")] == [(keep.id, kept.id)]


def test_index_follows_checkpoints_finish_and_purge(repo, db):
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "go")
    reply = repo.start_reply(conv.id)
    assert message_hits(search(db, "aardvark")) == []
    repo.checkpoint(reply.id, "the aardvark")
    assert [h.message_id for h in search(db, "aardvark")] == [reply.id]
    repo.checkpoint(reply.id, "the aardvark and the pangolin")
    assert [h.message_id for h in search(db, "pangolin")] == [reply.id]
    assert [h.message_id for h in search(db, "aardvark")] == [reply.id]  # no duplicate rows
    repo.finish_reply(reply.id, "only a pangolin in the end")
    assert search(db, "aardvark") == []  # the old text left the index
    (hit,) = search(db, "pangolin")
    assert hit.snippet_text == "only a pangolin in the end"

    repo.delete(conv.id)
    repo.purge_deleted()
    assert search(db, "pangolin") == []
    assert search(db, "go") == []
    # the index holds no rows for the purged messages
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql(
            "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'pangolin'"
        ).scalar() == 0
        conn.exec_driver_sql("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")


def test_diacritics_and_case_fold(repo, db):
    conv = repo.create_conversation("Café au lait")
    cafe = repo.add_message(conv.id, "user", "Meet me at the CAFÉ near the Straße")
    naive = repo.add_message(conv.id, "user", "a naïve résumé")
    assert {h.message_id for h in search(db, "cafe")} == {None, cafe.id}
    assert {h.message_id for h in search(db, "café")} == {None, cafe.id}
    assert [h.message_id for h in search(db, "resume")] == [naive.id]
    assert [h.message_id for h in search(db, "NAIVE RÉSUMÉ")] == [naive.id]
    assert [h.message_id for h in search(db, "straße")] == [cafe.id]
    (hit,) = message_hits(search(db, "cafe"))
    assert highlighted(hit) == ["CAFÉ"]


def test_non_latin_scripts(repo, db):
    conv = repo.create_conversation("чат")
    msg = repo.add_message(conv.id, "user", "Привет мир, как дела")
    assert [h.message_id for h in search(db, "мир")] == [msg.id]
    assert [h.message_id for h in search(db, "прив")] == [msg.id]  # prefix, case folded


def test_limit_and_offset_page_messages(repo, db):
    conv = repo.create_conversation("chat")
    made = [repo.add_message(conv.id, "user", f"lemon {i}") for i in range(7)]
    first = message_hits(search(db, "lemon", limit=3))
    second = message_hits(search(db, "lemon", limit=3, offset=3))
    third = message_hits(search(db, "lemon", limit=3, offset=6))
    got = [h.message_id for h in first + second + third]
    assert len(first) == 3 and len(second) == 3 and len(third) == 1
    assert sorted(got) == [m.id for m in made]


def test_matching_messages_of_one_conversation(repo, db):
    """What a chat opened from a hit scrolls to: its own matches only, as search() matches."""
    conv, other = repo.create_conversation("walks"), repo.create_conversation("more walks")
    first = repo.add_message(conv.id, "user", "the walrus on the beach")
    repo.add_message(conv.id, "assistant", "no match here")
    later = repo.add_message(conv.id, "user", "walruses again")  # the last word is a prefix
    repo.add_message(other.id, "user", "a walrus elsewhere")
    assert matching_messages(db, "walrus", conv.id) == {first.id, later.id}
    assert matching_messages(db, "the walrus", conv.id) == {first.id}
    assert matching_messages(db, "   ", conv.id) == set()


# ----- words in attached documents ----------------------------------------------------------

MANUAL = ("Unpack the kettle and rinse it.\n\n"
          "Descale the kettle monthly with citric acid.\n\n"
          "The warranty covers the kettle for two years.")


def test_words_in_an_attached_document_are_found(repo, db):
    conv = repo.create_conversation("appliances")
    question = repo.add_message(conv.id, "user", "What does it say?", documents=[new_document(MANUAL, "kettle.pdf")])
    repo.add_message(conv.id, "assistant", "It is a manual.")
    (hit,) = search(db, "citric")
    assert (hit.conversation_id, hit.conversation_title, hit.message_id, hit.role, hit.document_name) == (
        conv.id, "appliances", question.id, "user", "kettle.pdf")
    assert hit.snippet_text == "Descale the kettle monthly with citric acid."
    assert highlighted(hit) == ["citric"]
    assert matching_messages(db, "citric", conv.id) == {question.id}
    assert matching_messages(db, "citr", conv.id) == {question.id}  # the last word is a prefix, as in search


def test_one_hit_a_document_in_each_chat_its_best_chunk(repo, db):
    manual = new_document(MANUAL, "kettle.pdf")
    one, two, gone = (repo.create_conversation(t) for t in ("one", "two", "gone"))
    first = repo.add_message(one.id, "user", "read this", documents=[manual])
    repo.add_message(one.id, "user", "and again", documents=[dataclasses.replace(manual, name="again.pdf")])
    repo.add_message(two.id, "user", "here too", documents=[manual])
    repo.add_message(gone.id, "user", "deleted", documents=[manual])
    repo.delete(gone.id)
    hits = sorted((h for h in search(db, "kettle") if h.document_name is not None), key=lambda h: h.conversation_id)
    # every chunk says kettle; each chat gets one hit, from its first message attaching it
    assert [(h.conversation_id, h.message_id, h.document_name) for h in hits] == [
        (one.id, first.id, "kettle.pdf"), (two.id, first.id + 2, "kettle.pdf")]
    assert len(search(db, "kettle", limit=1)) == 1
    assert [h.document_name for h in search(db, "kettle", offset=1)] == []  # the first page only


def test_a_hit_in_a_message_comes_before_one_in_a_document(repo, db):
    conv = repo.create_conversation("chat")
    repo.add_message(conv.id, "user", "see the manual", documents=[new_document(MANUAL, "kettle.pdf")])
    said = repo.add_message(conv.id, "assistant", "The warranty is generous.")
    assert [(h.message_id, h.document_name) for h in search(db, "warranty")] == [
        (said.id, None), (said.id - 1, "kettle.pdf")]


def test_a_removed_document_is_no_longer_found(repo, db):
    conv = repo.create_conversation("chat")
    message = repo.add_message(conv.id, "user", "manual", documents=[new_document(MANUAL)])
    repo.delete_message(message.id)
    assert search(db, "citric") == []
    with db.engine.connect() as conn:
        conn.exec_driver_sql("INSERT INTO document_chunks_fts(document_chunks_fts) VALUES ('integrity-check')")
