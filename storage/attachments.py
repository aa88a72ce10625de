"""Documents and the messages attaching them, inside someone else's transaction: the steps
that ChatRepository (add, edit, copy, delete), DocumentRepository and the import share.

A document is stored once under its sha256 and never rewritten; it stays while any message
attaches it (a soft-deleted chat's too) and goes, with its chunks and their search rows,
once the last of them is deleted. An image is a document whose bytes are kept (`data`), its
text empty and without chunks (0011).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import asdict

from sqlalchemy import Connection, Select, delete, func, insert, select, text
from sqlalchemy.orm import Session

from storage.errors import StorageError
from storage.records import AttachmentRecord, ChunkSpan, NewDocument, SourceRecord
from storage.schema import Document, DocumentChunk, MessageAttachment, utcnow

SHA256 = re.compile(r"[0-9a-f]{64}")


# ----- checks --------------------------------------------------------------------------


def document_problem(sha256: object, text: str, chunks: Iterable[ChunkSpan]) -> str | None:
    """What is wrong with a document's key and chunks (None: nothing), in words that follow
    "document NAME:" or an import file's "documents 3:"."""
    if not isinstance(sha256, str) or not SHA256.fullmatch(sha256):
        return f"sha256 {sha256!r} is not 64 lowercase hexadecimal digits"
    for i, chunk in enumerate(chunks):
        if not 0 <= chunk.start <= chunk.end <= len(text):
            return (f"chunk {i + 1} ({chunk.start}..{chunk.end}) is outside the text "
                    f"({len(text)} characters)")
        if chunk.page is not None and chunk.page < 1:
            return f"chunk {i + 1}: page {chunk.page} is not 1 or more"
    return None


def check_documents(docs: Sequence[NewDocument]) -> None:
    """StorageError naming the first bad document; called before anything is written."""
    for doc in docs:
        problem = document_problem(doc.sha256, doc.text, doc.chunks)
        if problem is None and (doc.size_bytes < 0 or (doc.pages is not None and doc.pages < 0)):
            problem = "size and pages must be 0 or more"
        if problem is None and doc.data is not None and (doc.text or doc.chunks):
            problem = "an image (bytes kept) has no text and no chunks"
        if problem is not None:
            raise StorageError(f"document {doc.name!r}: {problem}; nothing was stored")


# ----- writing -------------------------------------------------------------------------


def insert_documents(s: Session | Connection, docs: Sequence[NewDocument]) -> set[str]:
    """Store the documents not stored yet (an existing row is reused as it is, never
    rewritten); the sha256s that were new. Checked first: check_documents."""
    check_documents(docs)
    wanted = {doc.sha256: doc for doc in docs}
    existing = set(s.scalars(select(Document.sha256).where(Document.sha256.in_(wanted))))
    new = [doc for sha, doc in wanted.items() if sha not in existing]
    if new:
        now = utcnow()
        s.execute(insert(Document), [
            {"sha256": d.sha256, "name": d.name, "mime": d.mime, "size_bytes": d.size_bytes,
             "pages": d.pages, "text": d.text, "data": d.data, "created_at": now} for d in new
        ])
        chunks = [{"sha256": d.sha256, "idx": i, "start": c.start, "end": c.end, "page": c.page,
                   "heading": c.heading} for d in new for i, c in enumerate(d.chunks)]
        if chunks:
            s.execute(insert(DocumentChunk), chunks)
            _index_chunks(s, new)
    return {doc.sha256 for doc in new}


_INDEX_CHUNK = text("INSERT INTO document_chunks_fts(rowid, text) VALUES (:id, :text)")


def _index_chunks(s: Session | Connection, docs: Sequence[NewDocument]) -> None:
    """The new chunks' words into the search index, sliced here from the text at hand (a
    trigger reading each slice out of the stored document costs its size per chunk)."""
    by_sha = {d.sha256: d for d in docs}
    ids = s.execute(select(DocumentChunk.id, DocumentChunk.sha256, DocumentChunk.idx)
                    .where(DocumentChunk.sha256.in_(by_sha)))
    rows = []
    for chunk_id, sha256, idx in ids:
        span = by_sha[sha256].chunks[idx]
        rows.append({"id": chunk_id, "text": by_sha[sha256].text[span.start:span.end]})
    s.execute(_INDEX_CHUNK, rows)


def attach(s: Session, message_id: int, attachments: Sequence[tuple[str, str]]) -> None:
    """(sha256, name) pairs on a message, in order; the documents must be stored."""
    if attachments:
        s.execute(insert(MessageAttachment), [
            {"message_id": message_id, "sha256": sha, "position": i, "name": name}
            for i, (sha, name) in enumerate(attachments)
        ])


def copy_attachments(s: Session, new_ids: dict[int, int]) -> None:
    """Attach to each new message (value) what the old one (key) attaches, in its order."""
    rows = s.execute(
        select(MessageAttachment.message_id, MessageAttachment.sha256, MessageAttachment.position,
               MessageAttachment.name).where(MessageAttachment.message_id.in_(new_ids))
    ).all()
    if rows:
        s.execute(insert(MessageAttachment), [
            {"message_id": new_ids[old], "sha256": sha, "position": pos, "name": name}
            for old, sha, pos, name in rows
        ])


# ----- deleting ------------------------------------------------------------------------


def detach(s: Session | Connection, message_ids: Collection[int] | Select) -> set[str]:
    """Remove the messages' attachment rows (ids, or a query of them) before the messages
    go; the sha256s they named, for drop_unreferenced once the messages are deleted."""
    if isinstance(message_ids, Collection) and not message_ids:
        return set()
    named = set(s.scalars(select(MessageAttachment.sha256).where(MessageAttachment.message_id.in_(message_ids))))
    if named:
        s.execute(delete(MessageAttachment).where(MessageAttachment.message_id.in_(message_ids)),
                  execution_options={"synchronize_session": False})
    return named


def drop_unreferenced(s: Session | Connection, among: Iterable[str] | None = None) -> int:
    """Delete the documents no message attaches any more (of `among`, or all), with their
    chunks and search rows; how many went."""
    used = select(MessageAttachment.sha256).where(MessageAttachment.sha256 == Document.sha256).exists()
    query = select(Document.sha256).where(~used)
    if among is not None:
        among = list(among)
        if not among:
            return 0
        query = query.where(Document.sha256.in_(among))
    unused = list(s.scalars(query))
    if unused:
        # The chunks by name, not by the foreign key's cascade: the FTS trigger sees each row.
        options = {"synchronize_session": False}
        s.execute(delete(DocumentChunk).where(DocumentChunk.sha256.in_(unused)), execution_options=options)
        s.execute(delete(Document).where(Document.sha256.in_(unused)), execution_options=options)
    return len(unused)


# ----- reading -------------------------------------------------------------------------


_ATTACHMENT_COLUMNS = (
    MessageAttachment.message_id, MessageAttachment.position, MessageAttachment.name, Document.sha256,
    Document.mime, Document.size_bytes, Document.pages, func.length(Document.text), Document.data.isnot(None),
)


def attachment_query():
    """AttachmentRecord's fields (in its order), attachments joined to their documents."""
    return select(*_ATTACHMENT_COLUMNS).join(Document, Document.sha256 == MessageAttachment.sha256)


def attachments_of(s: Session, message_ids: Collection[int]) -> dict[int, tuple[AttachmentRecord, ...]]:
    """The messages' attachments by message id, in order (one query); messages without any
    are not listed."""
    if not message_ids:
        return {}
    query = (attachment_query().where(MessageAttachment.message_id.in_(message_ids))
             .order_by(MessageAttachment.message_id, MessageAttachment.position))
    out: dict[int, list[AttachmentRecord]] = {}
    for row in s.execute(query):
        record = AttachmentRecord(*row)
        out.setdefault(record.message_id, []).append(record)
    return {message_id: tuple(records) for message_id, records in out.items()}


# ----- a reply's sources ----------------------------------------------------------------


def sources_to_json(sources: Sequence[SourceRecord]) -> str | None:
    return json.dumps([asdict(source) for source in sources]) if sources else None


def sources_from_json(raw: str | None) -> tuple[SourceRecord, ...]:
    return tuple(SourceRecord(**fields) for fields in json.loads(raw)) if raw else ()  # where: "" before it
