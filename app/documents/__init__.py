"""Documents attached to chats: a file's text and chunks (extract_document, split_chunks)."""

from app.documents.chunks import split_chunks
from app.documents.errors import DocumentError, ExtractionCancelled
from app.documents.extract import extract_document
from app.documents.file_bytes import MAX_DOCUMENT_BYTES
from app.documents.formats import SUPPORTED_SUFFIXES

__all__ = [
    "DocumentError",
    "ExtractionCancelled",
    "MAX_DOCUMENT_BYTES",
    "SUPPORTED_SUFFIXES",
    "extract_document",
    "split_chunks",
]
