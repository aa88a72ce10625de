"""A file as a document: its text, its pages and its chunks, or one line saying why not.

Runs on the caller's worker thread and holds no state between calls, so several files may
be extracted at once. The bytes hashed are the bytes converted: the file is read once."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.documents.chunks import split_chunks
from app.documents.errors import DocumentError, raise_if_cancelled
from app.documents.file_bytes import read_file_bytes
from app.documents.formats import SUPPORTED_KINDS, Format, Reader, format_of
from app.documents.pdf import pdf_pages
from app.documents.text_decode import decode_text
from app.documents.to_markdown import convert_to_markdown, slide_starts
from storage import NewDocument

Progress = Callable[[float], None]

# Shares of the progress bar: reading the bytes is quick, converting them is the work.
_READ_SHARE = 0.1
_CONVERT_SHARE = 0.85


@dataclass(frozen=True, slots=True)
class _Text:
    text: str
    page_starts: tuple[int, ...] = ()  # one per page (slide), the first 0; () without pages


def extract_document(path: Path, cancel: threading.Event | None = None,
                     progress: Progress | None = None) -> NewDocument:
    """The document in the file at path. progress gets fractions that grow to 1.0; cancel is
    checked between steps (and PDF pages): ExtractionCancelled. Any file that cannot
    become a whole document raises DocumentError, with nothing half done."""
    name = path.name
    format_ = format_of(path)
    if format_ is None:
        kind = f"type {path.suffix}" if path.suffix else "file without a type suffix"
        raise DocumentError(f"{name}: Chorus cannot read this {kind}; it reads {SUPPORTED_KINDS}")
    report = progress or (lambda fraction: None)
    data = read_file_bytes(path, cancel, _scaled(report, 0.0, _READ_SHARE))
    converted = _convert(data, name, format_, cancel, _scaled(report, _READ_SHARE, _CONVERT_SHARE))
    raise_if_cancelled(cancel, name)
    if not converted.text.strip():
        raise DocumentError(_no_text_message(name, format_))
    chunks = split_chunks(converted.text, converted.page_starts, markdown_headings=format_.markdown_headings,
                          table_rows=format_.table_rows)
    raise_if_cancelled(cancel, name)
    report(1.0)
    return NewDocument(
        sha256=hashlib.sha256(data).hexdigest(), name=name, mime=format_.mime, size_bytes=len(data),
        text=converted.text, pages=len(converted.page_starts) or None, chunks=chunks,
    )


def _convert(data: bytes, name: str, format_: Format, cancel: threading.Event | None, progress: Progress) -> _Text:
    raise_if_cancelled(cancel, name)
    if format_.reader is Reader.TEXT:
        return _Text(decode_text(data, name))
    if format_.reader is Reader.PDF:
        return _joined_pages(pdf_pages(data, name, cancel, progress))
    markdown = convert_to_markdown(data, name, format_)
    progress(1.0)
    if format_.reader is Reader.PPTX:
        return _Text(markdown, tuple(slide_starts(markdown)))
    return _Text(markdown)


def _joined_pages(pages: list[str]) -> _Text:
    """The pages one after the other, a blank line between them."""
    starts: list[int] = []
    offset = 0
    for page in pages:
        starts.append(offset)
        offset += len(page) + 2
    return _Text("\n\n".join(pages), tuple(starts))


def _no_text_message(name: str, format_: Format) -> str:
    if format_.reader is Reader.PDF:
        return f"{name} has no text to extract: its pages are images (a scan?); run OCR on it first"
    return f"{name} has no text in it"


def _scaled(progress: Progress, low: float, share: float) -> Progress:
    """progress for a step that fills share of the bar from low."""
    return lambda fraction: progress(low + share * fraction)
