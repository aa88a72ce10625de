"""A PDF's text page by page (pdfminer.six), so that every chunk knows its page, the caller
sees progress per page, and a cancel takes effect between pages."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable

from pdfminer.converter import TextConverter
from pdfminer.layout import LAParams
from pdfminer.pdfdocument import PDFDocument, PDFEncryptionError
from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
from pdfminer.pdfpage import PDFPage
from pdfminer.pdfparser import PDFParser
from pdfminer.pdftypes import resolve1

from app.documents.errors import DocumentError, ExtractionCancelled, one_line, raise_if_cancelled

# Readers accept a file whose end marker lies within its last KiB; a file cut short lacks it
# (pdfminer would read the pages before the cut and stay silent about the rest).
_TAIL = 1024


def pdf_pages(data: bytes, name: str, cancel: threading.Event | None = None,
              progress: Callable[[float], None] | None = None) -> list[str]:
    """The text of each page, in order ("" for a page without text). progress gets the
    fraction of pages read."""
    if b"%PDF-" not in data[:_TAIL]:
        raise DocumentError(f"{name} is not a PDF (it has no PDF header)")
    if b"%%EOF" not in data[-_TAIL:]:
        raise DocumentError(f"{name} is damaged: it is cut short (no end-of-file marker)")
    try:
        return _read_pages(data, name, cancel, progress)
    except (DocumentError, ExtractionCancelled):
        raise
    except PDFEncryptionError:  # PDFPasswordIncorrect among them
        raise DocumentError(f"{name} is encrypted: it needs a password to open") from None
    except Exception as exc:  # pdfminer's own and the Python errors a broken file trips in it
        raise DocumentError(f"{name} is damaged: {one_line(exc)}") from None


def _read_pages(data: bytes, name: str, cancel: threading.Event | None,
                progress: Callable[[float], None] | None) -> list[str]:
    document = PDFDocument(PDFParser(io.BytesIO(data)))
    total = _page_count(document)
    resources = PDFResourceManager()
    pages: list[str] = []
    for page in PDFPage.create_pages(document):
        raise_if_cancelled(cancel, name)
        pages.append(_page_text(resources, page))
        if progress is not None:
            # Without a count (a broken page tree read by scanning) the bar still moves, never full.
            progress(min(len(pages) / total, 1.0) if total else len(pages) / (len(pages) + 1))
    if total and len(pages) != total:  # pdfminer reads on past a broken page tree
        raise DocumentError(f"{name} is damaged: {len(pages)} of its {total} pages could be found")
    if not pages:
        raise DocumentError(f"{name} is damaged: no pages could be found in it")
    return pages


def _page_text(resources: PDFResourceManager, page: PDFPage) -> str:
    out = io.StringIO()
    device = TextConverter(resources, out, laparams=LAParams())
    try:
        PDFPageInterpreter(resources, device).process_page(page)
    finally:
        device.close()
    # pdfminer ends each page with a form feed; the pages are joined with blank lines instead.
    return out.getvalue().strip()


def _page_count(document: PDFDocument) -> int:
    """The page tree's own count of pages; 0 where it has none."""
    try:
        count = resolve1(resolve1(document.catalog["Pages"]).get("Count"))
    except Exception:  # a page tree without a count still has pages to read
        return 0
    return count if isinstance(count, int) and count > 0 else 0
