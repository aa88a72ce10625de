"""Documents for the storage tests: NewDocument values as the extraction would make them."""

from __future__ import annotations

import hashlib

from storage import ChunkSpan, NewDocument


def new_document(text: str, name: str = "notes.txt", paged: bool = False) -> NewDocument:
    """One chunk a paragraph (blank-line separated), on page i + 1 when paged; the sha256 of
    the text stands in for that of the file's bytes (one text, one document)."""
    chunks, start = [], 0
    for i, paragraph in enumerate(text.split("\n\n")):
        heading = paragraph.split(".")[0] if paged else ""
        chunks.append(ChunkSpan(start, start + len(paragraph), i + 1 if paged else None, heading))
        start += len(paragraph) + 2
    return NewDocument(
        sha256=hashlib.sha256(text.encode()).hexdigest(), name=name, mime="text/plain",
        size_bytes=len(text.encode()), text=text, pages=len(chunks) if paged else None, chunks=tuple(chunks),
    )


def chunk_texts(text: str, spans) -> list[str]:
    """The text of each chunk (ChunkSpan or ChunkHit)."""
    return [text[getattr(s, "chunk", s).start:getattr(s, "chunk", s).end] for s in spans]
