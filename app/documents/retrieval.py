"""Excerpts of documents too long for the context: the chunks that best match the question
(SQLite FTS5's bm25 over the stored chunks, storage.DocumentRepository.best_chunks), as many
as the token budget holds, shown to the model in document order with numbers to cite."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import zip_longest

from app.documents.tokens import TokenCounter
from storage import ChunkHit, ChunkSpan, DocumentRecord

# Candidates asked of the index; more than fit in any budget of a small context.
SEARCH_LIMIT = 64

EXCERPTS_INTRO = ("The attached documents are too long to read whole. These excerpts of them were "
                  "found for the question below; cite an excerpt by its number, as [1].")


@dataclass(frozen=True, slots=True)
class Excerpt:
    label: int  # [label] in the prompt, from 1
    sha256: str
    name: str
    chunk_index: int
    chunk: ChunkSpan
    text: str


def pick_excerpts(documents: Sequence[DocumentRecord], question: str, counter: TokenCounter, budget: int,
                  search: Callable[[Sequence[str], str, int], list[ChunkHit]]) -> list[Excerpt]:
    """The best chunks for the question that fit in budget tokens, in document order. A
    question that matches nothing (\"summarize this\") gets each document's opening chunks."""
    by_sha = {d.sha256: d for d in documents}
    hits = [(h.sha256, h.index) for h in search(list(by_sha), question, SEARCH_LIMIT) if h.sha256 in by_sha]
    candidates = hits or _openings(documents)
    chosen: list[tuple[str, int]] = []
    spent = counter.count(EXCERPTS_INTRO)
    for sha, index in candidates:
        doc = by_sha[sha]
        if index >= len(doc.chunks) or (sha, index) in chosen:
            continue
        cost = counter.count(_excerpt_text(doc, index)) + 16  # its heading line and spacing
        if spent + cost <= budget:
            chosen.append((sha, index))
            spent += cost
    order = {d.sha256: i for i, d in enumerate(documents)}
    chosen.sort(key=lambda c: (order[c[0]], c[1]))
    return [_excerpt(label, by_sha[sha], index) for label, (sha, index) in enumerate(chosen, start=1)]


def render_excerpts(excerpts: Sequence[Excerpt]) -> str:
    parts = [EXCERPTS_INTRO]
    for e in excerpts:
        parts.append(f"[{e.label}] {excerpt_title(e.name, e.chunk)}\n{e.text}")
    return "\n\n".join(parts)


def excerpt_title(name: str, chunk: ChunkSpan) -> str:
    """'report.pdf, page 3, "Results"': where an excerpt comes from, for the model and the view."""
    title = name
    if chunk.page:
        title += f", page {chunk.page}"
    if chunk.heading:
        title += f', "{chunk.heading}"'
    return title


def _openings(documents: Sequence[DocumentRecord]) -> list[tuple[str, int]]:
    """The documents' chunks taken in turn: each one's first, then each one's second..."""
    columns = [[(d.sha256, i) for i in range(len(d.chunks))] for d in documents]
    return [c for row in zip_longest(*columns) for c in row if c is not None]


def _excerpt_text(doc: DocumentRecord, index: int) -> str:
    chunk = doc.chunks[index]
    return doc.text[chunk.start:chunk.end].strip()


def _excerpt(label: int, doc: DocumentRecord, index: int) -> Excerpt:
    return Excerpt(label, doc.sha256, doc.name, index, doc.chunks[index], _excerpt_text(doc, index))
