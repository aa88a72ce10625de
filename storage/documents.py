"""Documents attached to chats: read by sha256, stored once, searched chunk by chunk (bm25),
and the sources a reply was shown. Messages attach them through ChatRepository.add_message;
what is stored, and when a document goes, is in storage/attachments.py.

Every method is one transaction, safe from any thread, returning plain dataclasses.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import bindparam, select, text, update

from storage import attachments
from storage.database import Database
from storage.errors import NotFoundError
from storage.records import AttachmentRecord, ChunkHit, ChunkSpan, DocumentRecord, NewDocument, SourceRecord
from storage.repository import _aware
from storage.schema import Conversation, Document, DocumentChunk, Message, MessageAttachment

_WORD = re.compile(r"\w+", re.UNICODE)

# Words too common to say which chunk answers a question. Dropped unless the question is
# nothing else ("what is it?"); bm25 weighs the rest by rarity anyway.
STOP_WORDS = frozenset(
    "a an and are as at be by can do does for from had has have how i in is it its me my of on "
    "or so than that the their them there these they this to was we were what when where which "
    "who why will with you your".split()
)

_BEST_CHUNKS_SQL = text(
    """
    SELECT c.sha256, c.idx, c.start, c."end", c.page, c.heading, document_chunks_fts.rank
    FROM document_chunks_fts JOIN document_chunks c ON c.id = document_chunks_fts.rowid
    WHERE document_chunks_fts MATCH :query AND c.sha256 IN :sha256s
    ORDER BY document_chunks_fts.rank, c.sha256, c.idx
    LIMIT :limit
    """
).bindparams(bindparam("sha256s", expanding=True))


def any_word_query(question: str) -> str | None:
    """An FTS5 query matching a chunk with any of the question's words (all of them would
    rarely be in one chunk); None when it has no word."""
    words = list(dict.fromkeys(w.lower() for w in _WORD.findall(question)))
    telling = [w for w in words if w not in STOP_WORDS] or words
    return " OR ".join(f'"{w}"' for w in telling) or None


class DocumentRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    def document(self, sha256: str) -> DocumentRecord:
        with self.db.begin() as s:
            doc = s.get(Document, sha256)
            if doc is None:
                raise NotFoundError(f"no document with sha256 {sha256}")
            spans = s.execute(select(DocumentChunk.start, DocumentChunk.end, DocumentChunk.page,
                                     DocumentChunk.heading).where(DocumentChunk.sha256 == sha256)
                              .order_by(DocumentChunk.idx))
            return DocumentRecord(doc.sha256, doc.name, doc.mime, doc.size_bytes, doc.text, doc.pages,
                                  tuple(ChunkSpan(*span) for span in spans), _aware(doc.created_at), doc.data)

    def store(self, doc: NewDocument) -> DocumentRecord:
        """The document stored (if it was not already: the stored one is kept as it is)."""
        with self.db.begin() as s:
            attachments.insert_documents(s, [doc])
        return self.document(doc.sha256)

    def best_chunks(self, sha256s: Sequence[str], query_text: str, limit: int) -> list[ChunkHit]:
        """The chunks of these documents that best match the question's words (bm25, best
        first; any word matches). [] for a question without words."""
        query = any_word_query(query_text)
        if query is None or not sha256s or limit <= 0:
            return []
        with self.db.engine.connect() as conn:
            rows = conn.execute(_BEST_CHUNKS_SQL, {"query": query, "sha256s": list(sha256s), "limit": limit})
            return [ChunkHit(sha, idx, ChunkSpan(start, end, page, heading), rank)
                    for sha, idx, start, end, page, heading, rank in rows]

    def set_sources(self, message_id: int, sources: Sequence[SourceRecord]) -> None:
        """The excerpts a reply was shown (replacing any earlier ones; none clears them)."""
        with self.db.begin() as s:
            done = s.execute(update(Message).where(Message.id == message_id)
                             .values(sources_json=attachments.sources_to_json(sources)))
            if done.rowcount != 1:
                raise NotFoundError(f"message {message_id} does not exist")

    def conversation_documents(self, conversation_id: int) -> list[AttachmentRecord]:
        """Each document attached anywhere in the conversation (every branch) once, as it
        was first attached, first attachment first."""
        query = (attachments.attachment_query()
                 .join(Message, Message.id == MessageAttachment.message_id)
                 .where(Message.conversation_id == conversation_id)
                 .order_by(MessageAttachment.message_id, MessageAttachment.position))
        with self.db.begin() as s:
            if s.get(Conversation, conversation_id) is None:
                raise NotFoundError(f"conversation {conversation_id} does not exist")
            first: dict[str, AttachmentRecord] = {}
            for row in s.execute(query):
                record = AttachmentRecord(*row)
                first.setdefault(record.sha256, record)
            return list(first.values())

    def purge_unused(self) -> int:
        """Delete every document no message attaches (one stored and never attached, or
        left by an import that was cut short); how many went."""
        with self.db.begin() as s:
            return attachments.drop_unreferenced(s)
