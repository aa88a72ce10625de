"""Images attached to messages (revision 0011): a document whose bytes are kept (data), its
text empty and without chunks, stored once by sha256 and carried like any document by
branches, deletes, backup, export and import."""

from __future__ import annotations

import hashlib
import sqlite3

import pytest

from app.chats.store import open_chat_store
from storage import ChatRepository, DocumentRepository, ImportRejected, NewDocument, NotFoundError, StorageError
from storage.backup import backup_database
from storage.chat_file_format import export_json, import_data
from storage.database import open_database
from tests.support.documents import new_document

PIXELS = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4  # bytes are all storage sees


def new_image(data: bytes = PIXELS, name: str = "red.png") -> NewDocument:
    return NewDocument(hashlib.sha256(data).hexdigest(), name, "image/png", len(data), "", None, (), data)


def rows(db, table: str) -> int:
    with sqlite3.connect(db.path) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def test_an_image_is_stored_once_with_its_bytes_and_goes_with_its_last_message(repo, db):
    docs = DocumentRepository(db)
    conv = repo.create_conversation("look")
    first = repo.add_message(conv.id, "user", "What is it?", documents=[new_image(), new_document("A note.")])
    repo.add_message(conv.id, "user", "Again?", documents=[new_image(name="again.png")], parent_id=first.id)
    assert rows(db, "documents") == 2 and rows(db, "document_chunks_fts") == 1  # the note's chunk only
    image, note = repo.active_path(conv.id).attachments[first.id]
    assert (image.name, image.is_image, image.chars, note.is_image) == ("red.png", True, 0, False)
    record = docs.document(image.sha256)
    assert record.data == PIXELS and record.is_image and record.text == "" and record.chunks == ()
    assert docs.document(note.sha256).data is None
    repo.delete_message(first.id)
    assert rows(db, "documents") == 0
    with pytest.raises(NotFoundError):
        docs.document(image.sha256)


def test_an_image_with_text_or_chunks_is_refused(repo):
    conv = repo.create_conversation("bad")
    bad = NewDocument(new_image().sha256, "x.png", "image/png", 3, "text", None, (), PIXELS)
    with pytest.raises(StorageError, match="an image .* has no text and no chunks"):
        repo.add_message(conv.id, "user", "hm", documents=[bad])


def test_export_and_import_carry_an_images_bytes(repo, db, other_db):
    conv = repo.create_conversation("look")
    message = repo.add_message(conv.id, "user", "What is it?", documents=[new_image()])
    data = export_json(db, [conv.id])
    (exported,) = data["documents"]
    assert exported["text"] == "" and exported["data"].startswith("iVBORw0KGgo")  # PNG's magic in base64
    (new_id,) = import_data(other_db, data).conversation_ids
    path = ChatRepository(other_db).active_path(new_id)
    (attached,) = path.attachments[path.messages[0].id]
    assert attached.is_image and DocumentRepository(other_db).document(attached.sha256).data == PIXELS
    assert message.id  # the source chat is untouched
    exported["data"] = exported["data"][:-8] + "AAAAAAA="
    with pytest.raises(ImportRejected, match="data is not the bytes its sha256 names"):
        import_data(other_db, data)


def test_a_backup_holds_an_image(tmp_path):
    db, repo = open_chat_store(tmp_path)
    try:
        conv = repo.create_conversation()
        message = repo.add_message(conv.id, "user", "look", documents=[new_image()])
        backup_database(tmp_path / "chorus.db", tmp_path / "copy.db")
    finally:
        db.close()
    copy = open_database(tmp_path / "copy.db")
    try:
        (attached,) = ChatRepository(copy).active_path(conv.id).attachments[message.id]
        assert DocumentRepository(copy).document(attached.sha256).data == PIXELS
    finally:
        copy.close()
