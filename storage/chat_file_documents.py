"""The documents of a chat file (version 2): the top-level `documents` list (each document
once, its text and chunks; an image's bytes in base64 as `data`), a message's `attachments`
({sha256, name}) and its `sources` (the excerpts a reply was shown). Written by export,
checked whole before an import writes. The rest of the format is storage/chat_file_format.py's;
it is documented in docs/chat-file-format.md.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Collection
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from storage.attachments import SHA256, document_problem
from storage.errors import require_import as _require
from storage.records import ChunkSpan, NewDocument, SourceRecord
from storage.schema import Document, DocumentChunk, Message, MessageAttachment

_SOURCE_FIELDS = ("label", "sha256", "name", "chunk_index", "page", "cited", "where")
_SOURCE_DEFAULTS = {"cited": False, "where": ""}


# ----- export --------------------------------------------------------------------------


def attachments_by_message(s: Session, conversation_ids: Collection[int]) -> dict[int, list[dict]]:
    """{message id: [{sha256, name}, ...]} for the conversations' messages that attach any."""
    rows = s.execute(
        select(MessageAttachment.message_id, MessageAttachment.sha256, MessageAttachment.name)
        .join(Message, Message.id == MessageAttachment.message_id)
        .where(Message.conversation_id.in_(conversation_ids))
        .order_by(MessageAttachment.message_id, MessageAttachment.position)
    )
    out: dict[int, list[dict]] = {}
    for message_id, sha256, name in rows:
        out.setdefault(message_id, []).append({"sha256": sha256, "name": name})
    return out


def documents_json(s: Session, sha256s: Collection[str]) -> list[dict]:
    """The documents with these sha256s, each once, in sha256 order."""
    chunks: dict[str, list[dict]] = {}
    for sha256, start, end, page, heading in s.execute(
        select(DocumentChunk.sha256, DocumentChunk.start, DocumentChunk.end, DocumentChunk.page,
               DocumentChunk.heading).where(DocumentChunk.sha256.in_(sha256s))
        .order_by(DocumentChunk.sha256, DocumentChunk.idx)
    ):
        chunks.setdefault(sha256, []).append({"start": start, "end": end, "page": page, "heading": heading})
    docs = s.scalars(select(Document).where(Document.sha256.in_(sha256s)).order_by(Document.sha256))
    return [{"sha256": d.sha256, "name": d.name, "mime": d.mime, "size_bytes": d.size_bytes, "pages": d.pages,
             "text": d.text, "chunks": chunks.get(d.sha256, []),
             **({"data": base64.b64encode(d.data).decode("ascii")} if d.data is not None else {})} for d in docs]


# ----- import: checks ------------------------------------------------------------------


def validate_documents(documents: Any) -> dict[str, NewDocument]:
    """The file's documents by sha256, each checked (a chunk outside its text, a bad sha256
    or a document listed twice refuse the file)."""
    _require(isinstance(documents, list), '"documents" must be a list')
    out: dict[str, NewDocument] = {}
    for i, doc in enumerate(documents):
        where = f"document {i + 1}"
        _require(isinstance(doc, dict), f"{where} must be an object")
        for key in ("name", "mime", "text"):
            _require(isinstance(doc.get(key), str), f"{where}: {key} must be text")
        _require(_is_count(doc.get("size_bytes")), f"{where}: size_bytes must be a whole number of 0 or more")
        _require(doc.get("pages") is None or _is_count(doc["pages"]), f"{where}: pages must be a whole number")
        spans = _chunks(doc.get("chunks"), where)
        problem = document_problem(doc.get("sha256"), doc["text"], spans)
        _require(problem is None, f"{where}: {problem}")
        _require(doc["sha256"] not in out, f"{where}: sha256 {doc['sha256']} is listed twice")
        out[doc["sha256"]] = NewDocument(doc["sha256"], doc["name"], doc["mime"], doc["size_bytes"],
                                         doc["text"], doc.get("pages"), spans, _image_bytes(doc, where))
    return out


def _image_bytes(doc: dict, where: str) -> bytes | None:
    """An image's bytes (base64 in "data"), which must be what its sha256 names."""
    if doc.get("data") is None:
        return None
    _require(isinstance(doc["data"], str), f"{where}: data must be base64 text")
    try:
        data: bytes | None = base64.b64decode(doc["data"], validate=True)
    except (binascii.Error, ValueError):
        data = None
    _require(data is not None, f"{where}: data is not valid base64")
    assert data is not None
    _require(hashlib.sha256(data).hexdigest() == doc["sha256"], f"{where}: data is not the bytes its sha256 names")
    _require(not doc["text"] and not doc.get("chunks"), f"{where}: an image (data) has no text and no chunks")
    return data


def _chunks(chunks: Any, where: str) -> tuple[ChunkSpan, ...]:
    _require(isinstance(chunks, list), f"{where}: chunks must be a list")
    spans = []
    for j, chunk in enumerate(chunks):
        here = f"{where}, chunk {j + 1}"
        _require(isinstance(chunk, dict), f"{here} must be an object")
        _require(_is_count(chunk.get("start")) and _is_count(chunk.get("end")),
                 f"{here}: start and end must be whole numbers of 0 or more")
        _require(chunk.get("page") is None or _is_count(chunk["page"]), f"{here}: page must be a whole number")
        _require(isinstance(chunk.get("heading", ""), str), f"{here}: heading must be text")
        spans.append(ChunkSpan(chunk["start"], chunk["end"], chunk.get("page"), chunk.get("heading", "")))
    return tuple(spans)


def validate_message_documents(m: dict, documents: Collection[str], where: str) -> None:
    """A message's attachments (each a document of the file) and sources."""
    attachments = m.get("attachments", [])
    _require(isinstance(attachments, list), f"{where}: attachments must be a list")
    for k, attachment in enumerate(attachments):
        here = f"{where}, attachment {k + 1}"
        _require(isinstance(attachment, dict) and isinstance(attachment.get("name"), str),
                 f"{here} must be an object with a name")
        _require(attachment.get("sha256") in documents,
                 f"{here}: sha256 {attachment.get('sha256')!r} is not one of the file's documents")
    sources = m.get("sources", [])
    _require(isinstance(sources, list), f"{where}: sources must be a list")
    for k, source in enumerate(sources):
        _require(_is_source(source), f"{where}, source {k + 1} must be an object with a label, a sha256, "
                                     "a name, a chunk_index, a page (or null), cited (true or false) "
                                     "and where (text, or none)")


def _is_source(source: Any) -> bool:
    return (isinstance(source, dict) and _is_count(source.get("label")) and isinstance(source.get("sha256"), str)
            and SHA256.fullmatch(source["sha256"]) is not None and isinstance(source.get("name"), str)
            and _is_count(source.get("chunk_index")) and (source.get("page") is None or _is_count(source["page"]))
            and isinstance(source.get("cited", False), bool) and isinstance(source.get("where", ""), str))


def source_records(m: dict) -> list[SourceRecord]:
    """A checked message's sources, only the fields Chorus knows."""
    return [SourceRecord(*(source.get(key, _SOURCE_DEFAULTS.get(key)) for key in _SOURCE_FIELDS))
            for source in m.get("sources", [])]


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63
