"""A conversation's next prompt with the documents attached along its branch: the part of
building a reply's request that reads storage (on the caller's thread, never the GUI's)."""

from __future__ import annotations

from collections.abc import Sequence

from app.documents.prompt import DocumentPrompt, build_prompt
from app.documents.tokens import TokenCounter
from storage import ActivePath, DocumentRecord, DocumentRepository, MessageRecord


def attached_shas(path: ActivePath, messages: Sequence[MessageRecord]) -> list[str]:
    """The distinct documents attached to these messages of the path, first attached first."""
    seen: dict[str, None] = {}
    for m in messages:
        for a in path.attachments.get(m.id, ()):
            seen.setdefault(a.sha256, None)
    return list(seen)


def chat_prompt(turns: Sequence[dict], path: ActivePath, messages: Sequence[MessageRecord],
                documents: DocumentRepository, counter: TokenCounter, n_ctx: int | None,
                reply_tokens: int | None) -> DocumentPrompt:
    """turns: the prompt's messages as the chat has them (messages: the records they came from)."""
    shas = attached_shas(path, messages)
    records: list[DocumentRecord] = [documents.document(sha) for sha in shas]
    return build_prompt(turns, records, counter, n_ctx, reply_tokens, documents.best_chunks)
