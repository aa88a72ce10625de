"""The documents of a chat file (version 2): exported once each with the conversations using
them, imported back (reused when already stored), refused whole when they do not add up."""

from __future__ import annotations

import copy
import json
import sqlite3

import pytest

from storage import ChatRepository, DocumentRepository, ImportRejected, SourceRecord, search
from storage.chat_file_format import export_json, import_data
from tests.support.documents import new_document

RECIPE = "Whisk two eggs.\n\nFold in the flour slowly.\n\nBake for twenty minutes."
MAP = "The harbour is east of the market."
UNUSED = "Nobody attaches this one in the exported chat."


def counts(db) -> tuple[int, ...]:
    with sqlite3.connect(db.path) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
                     for t in ("conversations", "messages", "documents", "document_chunks", "message_attachments"))


def build_chat(db, repo) -> tuple[int, SourceRecord]:
    """A chat attaching RECIPE twice (two names) and MAP, whose reply has sources; and
    another chat, not exported, attaching UNUSED."""
    recipe = new_document(RECIPE, "cake.pdf", paged=True)
    conv = repo.create_conversation("Baking")
    repo.add_message(conv.id, "user", "How long?", documents=[recipe, new_document(MAP, "map.txt")])
    answer = repo.add_message(conv.id, "assistant", "Twenty minutes [1].")
    source = SourceRecord(1, recipe.sha256, "cake.pdf", 2, 3, True, where="Fold in the flour slowly")
    DocumentRepository(db).set_sources(answer.id, [source])
    repo.add_message(conv.id, "user", "And again?", documents=[new_document(RECIPE, "cake copy.pdf", paged=True)])
    other = repo.create_conversation("Other")
    repo.add_message(other.id, "user", "unused", documents=[new_document(UNUSED)])
    return conv.id, source


def attachments_shape(db, conversation_id: int) -> list:
    """Per message of the branch on screen: its content and (name, text, chunks) attached."""
    path = ChatRepository(db).active_path(conversation_id)
    docs = DocumentRepository(db)
    return [(m.content, m.sources, [(a.position, a.name, docs.document(a.sha256).text, docs.document(a.sha256).chunks)
                                    for a in path.attachments.get(m.id, ())]) for m in path.messages]


def test_export_writes_each_used_document_once(db, repo):
    conv_id, source = build_chat(db, repo)
    data = export_json(db, [conv_id])
    assert data["version"] == 2
    assert sorted(d["text"] for d in data["documents"]) == sorted([RECIPE, MAP])
    recipe = next(d for d in data["documents"] if d["text"] == RECIPE)
    assert (recipe["name"], recipe["mime"], recipe["pages"], recipe["size_bytes"]) == (
        "cake.pdf", "text/plain", 3, len(RECIPE))
    assert recipe["chunks"][1] == {"start": 17, "end": 42, "page": 2, "heading": "Fold in the flour slowly"}
    first, answer, again = data["conversations"][0]["messages"]
    assert [a["name"] for a in first["attachments"]] == ["cake.pdf", "map.txt"]
    assert answer["sources"] == [{"label": 1, "sha256": source.sha256, "name": "cake.pdf", "chunk_index": 2,
                                  "page": 3, "cited": True, "where": "Fold in the flour slowly"}]
    assert "attachments" not in answer and "sources" not in first  # only when present
    assert again["attachments"] == [{"sha256": recipe["sha256"], "name": "cake copy.pdf"}]


def test_round_trip_into_a_fresh_database_gives_the_same_attachments(db, repo, other_db):
    conv_id, _source = build_chat(db, repo)
    text = json.dumps(export_json(db, [conv_id]), ensure_ascii=False)
    (new_id,) = import_data(other_db, json.loads(text)).conversation_ids
    assert attachments_shape(other_db, new_id) == attachments_shape(db, conv_id)
    assert counts(other_db) == (1, 3, 2, 4, 3)  # two documents (the unused chat's stayed home)
    (hit,) = [h for h in search(other_db, "harbour") if h.document_name]
    assert (hit.conversation_id, hit.document_name) == (new_id, "map.txt")


def test_an_import_reuses_documents_already_stored(db, repo):
    conv_id, _source = build_chat(db, repo)
    before = counts(db)
    (copy_id,) = import_data(db, export_json(db, [conv_id])).conversation_ids
    after = counts(db)
    assert after[2:4] == before[2:4]  # no new documents, no new chunks
    assert after[4] == before[4] + 3  # the copy's own attachment rows
    assert attachments_shape(db, copy_id) == attachments_shape(db, conv_id)


def test_a_version_1_file_still_imports(other_db):
    data = {"format": "chorus-chats", "version": 1, "conversations": [
        {"title": "old", "messages": [{"id": 1, "parent": None, "role": "user", "content": "hi"}]}]}
    (conv_id,) = import_data(other_db, data).conversation_ids
    path = ChatRepository(other_db).active_path(conv_id)
    assert [m.content for m in path.messages] == ["hi"] and path.attachments == {}


def _file(db, repo) -> dict:
    conv_id, _source = build_chat(db, repo)
    return export_json(db, [conv_id])


def _break(data: dict, how: str) -> dict:
    data = copy.deepcopy(data)
    first = data["conversations"][0]["messages"][0]
    doc = data["documents"][0]
    if how == "unknown sha256":
        first["attachments"][1]["sha256"] = "0" * 64
    elif how == "chunk outside":
        doc["chunks"][-1]["end"] = len(doc["text"]) + 1
    elif how == "bad sha256":
        doc["sha256"] = doc["sha256"].upper()
    elif how == "listed twice":
        data["documents"].append(dict(doc))
    elif how == "bad source":
        data["conversations"][0]["messages"][1]["sources"][0]["label"] = "one"
    elif how == "documents not a list":
        data["documents"] = {"a": 1}
    elif how == "text not text":
        doc["text"] = None
    return data


@pytest.mark.parametrize("how, words", [
    ("unknown sha256", "conversation 1, message 1, attachment 2: sha256 '000"),
    ("chunk outside", "document 1: chunk "),
    ("bad sha256", "document 1: sha256 '"),
    ("listed twice", "document 3: sha256 "),
    ("bad source", "conversation 1, message 2, source 1 must be an object with a label"),
    ("documents not a list", '"documents" must be a list'),
    ("text not text", "document 1: text must be text"),
])
def test_a_file_whose_documents_do_not_add_up_is_refused_whole(db, repo, other_db, how, words):
    data = _break(_file(db, repo), how)
    before = counts(other_db)
    with pytest.raises(ImportRejected, match="nothing was written") as caught:
        import_data(other_db, data)
    assert words in str(caught.value)
    assert counts(other_db) == before


def test_a_failed_import_takes_back_the_documents_it_stored_and_keeps_the_reused(db, repo, other_db):
    data = _file(db, repo)
    data["comparisons"] = [{"id": "c", "title": "t", "settings": {}}]
    data["conversations"][0]["id"], data["conversations"][0]["comparison"] = 1, "c"
    kept = ChatRepository(other_db).create_conversation("has the map")
    ChatRepository(other_db).add_message(kept.id, "user", "map", documents=[new_document(MAP, "map.txt")])
    before = counts(other_db)

    def remap(settings, members):  # the last step fails: everything is undone
        raise KeyError("remap failed")

    with pytest.raises(KeyError):
        import_data(other_db, data, remap=remap)
    assert counts(other_db) == before  # the recipe went again; the map, used here, stayed
    assert DocumentRepository(other_db).document(new_document(MAP).sha256).text == MAP
