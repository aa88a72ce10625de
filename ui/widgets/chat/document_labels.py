"""The words on a document's chip, the same in the composer and on a sent message."""

from __future__ import annotations

from storage import SourceRecord


def size_text(size_bytes: int) -> str:
    if size_bytes < 1000:
        return f"{size_bytes} B"
    if size_bytes < 1_000_000:
        return f"{size_bytes / 1000:.0f} KB"
    return f"{size_bytes / 1_000_000:.1f} MB"


def document_details(pages: int | None, size_bytes: int, chars: int) -> str:
    """"3 pages · 41 KB · 12,345 characters" (no pages for a format without them)."""
    parts = [f"{pages} page{'s' if pages != 1 else ''}"] if pages else []
    parts += [size_text(size_bytes), f"{chars:,} characters"]
    return " · ".join(parts)


def image_details(mime: str, size_bytes: int) -> str:
    """"PNG · 41 KB": an image's chip, in the composer and on a sent message."""
    return f"{mime.removeprefix('image/').upper()} image · {size_text(size_bytes)}"


def source_label(source: SourceRecord) -> str:
    """A citation as the reply's chip shows it: "[1] report.pdf p.3", "[2] guide.md · Install ›
    Linux", "[3] book.xlsx · Sales, rows 12–40"."""
    page = f" p.{source.page}" if source.page else ""
    where = f" · {source.where}" if source.where else ""
    return f"[{source.label}] {source.name}{page}{where}"
