"""Full-text search over message text, conversation titles and the documents attached to
messages (FTS5, bm25 ranking)."""

from __future__ import annotations

import re

from sqlalchemy import Connection, text

from storage.database import Database
from storage.records import SearchHit
from storage.schema import CHAT_ORIGIN

# Private-use characters mark matches inside FTS5 snippets; they never occur in chats.
_START, _END = "\ue000", "\ue001"
_WORD = re.compile(r"\w+", re.UNICODE)
SNIPPET_TOKENS = 12

_MESSAGES_SQL = text(
    f"""
    SELECT m.id, m.conversation_id, c.title, c.origin, m.role,
           snippet(messages_fts, 0, '{_START}', '{_END}', '…', {SNIPPET_TOKENS}) AS snip,
           messages_fts.rank AS rank
    FROM messages_fts
    JOIN messages m ON m.id = messages_fts.rowid
    JOIN conversations c ON c.id = m.conversation_id
    WHERE messages_fts MATCH :query AND c.deleted_at IS NULL
          AND (:origin IS NULL OR c.origin = :origin)
    ORDER BY messages_fts.rank
    LIMIT :limit OFFSET :offset
    """
)

_TITLES_SQL = text(
    f"""
    SELECT c.id, c.title, c.origin,
           highlight(conversations_fts, 0, '{_START}', '{_END}') AS snip,
           conversations_fts.rank AS rank
    FROM conversations_fts
    JOIN conversations c ON c.id = conversations_fts.rowid
    WHERE conversations_fts MATCH :query AND c.deleted_at IS NULL
          AND (:origin IS NULL OR c.origin = :origin)
    ORDER BY conversations_fts.rank
    LIMIT :limit
    """
)


# Every (matching chunk, attachment of its document) pair, best chunk first: the first row
# of a (conversation, document) is its best chunk, attached by its first message there.
_DOCUMENTS_SQL = text(
    """
    SELECT m.conversation_id, c.title, c.origin, a.message_id, m.role, a.name, ch.sha256, ch.id,
           document_chunks_fts.rank AS rank
    FROM document_chunks_fts
    JOIN document_chunks ch ON ch.id = document_chunks_fts.rowid
    JOIN message_attachments a ON a.sha256 = ch.sha256
    JOIN messages m ON m.id = a.message_id
    JOIN conversations c ON c.id = m.conversation_id
    WHERE document_chunks_fts MATCH :query AND c.deleted_at IS NULL
          AND (:origin IS NULL OR c.origin = :origin)
    ORDER BY document_chunks_fts.rank, a.message_id, a.position
    """
)

# One chunk's snippet, asked for only for the chunks shown (not every match).
_CHUNK_SNIPPET_SQL = text(
    f"""
    SELECT snippet(document_chunks_fts, 0, '{_START}', '{_END}', '…', {SNIPPET_TOKENS})
    FROM document_chunks_fts WHERE document_chunks_fts MATCH :query AND rowid = :chunk_id
    """
)

_MATCHES_SQL = text(
    """
    SELECT m.id FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid
    WHERE messages_fts MATCH :query AND m.conversation_id = :conversation_id
    UNION
    SELECT a.message_id FROM document_chunks_fts
    JOIN document_chunks ch ON ch.id = document_chunks_fts.rowid
    JOIN message_attachments a ON a.sha256 = ch.sha256
    JOIN messages m ON m.id = a.message_id
    WHERE document_chunks_fts MATCH :query AND m.conversation_id = :conversation_id
    """
)


def fts_query(user_text: str) -> str | None:
    """Words as quoted terms (all must match); the last one also matches as a prefix,
    so results appear while the user is still typing. None when there is no word."""
    words = _WORD.findall(user_text)
    if not words:
        return None
    terms = [f'"{w}"' for w in words]
    terms[-1] += "*"
    return " ".join(terms)


def split_snippet(snippet: str) -> tuple[tuple[str, bool], ...]:
    runs: list[tuple[str, bool]] = []
    for i, part in enumerate(re.split(f"[{_START}{_END}]", snippet)):
        if part:
            runs.append((part, i % 2 == 1))
    return tuple(runs)


def search(db: Database, user_text: str, limit: int = 20, offset: int = 0,
           origin: str | None = CHAT_ORIGIN) -> list[SearchHit]:
    """Best matches first: matching titles (first page only), then messages of every
    branch, then (first page only) attached documents, one hit a document in each chat
    that attaches it. Deleted conversations are left out; origin: the chats' (default),
    the API's (API_ORIGIN) or both (None)."""
    query = fts_query(user_text)
    if query is None:
        return []
    hits: list[SearchHit] = []
    where = {"query": query, "origin": origin}
    with db.engine.connect() as conn:
        if offset == 0:
            for conv_id, title, conv_origin, snip, rank in conn.execute(_TITLES_SQL, {**where, "limit": limit}):
                hits.append(SearchHit(conv_id, title, None, None, split_snippet(snip), rank, origin=conv_origin))
        rows = conn.execute(_MESSAGES_SQL, {**where, "limit": limit, "offset": offset})
        for msg_id, conv_id, title, conv_origin, role, snip, rank in rows:
            hits.append(SearchHit(conv_id, title, msg_id, role, split_snippet(snip), rank, origin=conv_origin))
        if offset == 0:
            hits += _document_hits(conn, where, limit)
    return hits


def _document_hits(conn: Connection, where: dict, limit: int) -> list[SearchHit]:
    """The best chunk of each (conversation, attached document), at most limit of them."""
    best: dict[tuple[int, str], tuple] = {}
    rows = conn.execute(_DOCUMENTS_SQL, where) if limit > 0 else ()
    for row in rows:
        best.setdefault((row[0], row[6]), row)  # (conversation, sha256)
        if len(best) == limit:
            break
    hits = []
    for conv_id, title, conv_origin, msg_id, role, name, _sha256, chunk_id, rank in best.values():
        snip = conn.execute(_CHUNK_SNIPPET_SQL, {"query": where["query"], "chunk_id": chunk_id}).scalar_one()
        hits.append(SearchHit(conv_id, title, msg_id, role, split_snippet(snip), rank, document_name=name,
                              origin=conv_origin))
    return hits


def matching_messages(db: Database, user_text: str, conversation_id: int) -> set[int]:
    """The ids of one conversation's messages (every branch) that the search words match, as
    search() matches them: a chat opened from a hit shows the first of them."""
    query = fts_query(user_text)
    if query is None:
        return set()
    with db.engine.connect() as conn:
        rows = conn.execute(_MATCHES_SQL, {"query": query, "conversation_id": conversation_id})
        return {msg_id for (msg_id,) in rows}
