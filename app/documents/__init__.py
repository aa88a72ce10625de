"""Documents attached to chats: a file's text and chunks (extract_document, split_chunks),
where they go in a chat's prompt (build_prompt, chat_prompt: whole, or excerpts retrieved
for the question), how their tokens are counted, and which prefixes stay pinned."""

from app.documents.chat_prompt import attached_shas, chat_prompt
from app.documents.chunks import split_chunks
from app.documents.errors import DocumentError, ExtractionCancelled
from app.documents.extract import extract_document
from app.documents.file_bytes import MAX_DOCUMENT_BYTES
from app.documents.formats import SUPPORTED_SUFFIXES
from app.documents.pins import DocumentPins
from app.documents.prompt import (
    DocumentPrompt,
    DocumentUse,
    build_prompt,
    cited_labels,
    fit_text,
    render_document,
    render_documents,
    system_block,
    with_cited,
)
from app.documents.retrieval import Excerpt, excerpt_title
from app.documents.tokens import EngineTokens, GuessedTokens, TokenCounter, guessed_tokens

__all__ = [
    "DocumentError",
    "DocumentPins",
    "DocumentPrompt",
    "DocumentUse",
    "Excerpt",
    "ExtractionCancelled",
    "EngineTokens",
    "GuessedTokens",
    "MAX_DOCUMENT_BYTES",
    "SUPPORTED_SUFFIXES",
    "TokenCounter",
    "guessed_tokens",
    "attached_shas",
    "build_prompt",
    "chat_prompt",
    "cited_labels",
    "excerpt_title",
    "extract_document",
    "fit_text",
    "render_document",
    "render_documents",
    "split_chunks",
    "system_block",
    "with_cited",
]
