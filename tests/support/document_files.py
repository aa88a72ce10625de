"""Real files of every format the documents are extracted from, written by the libraries
that make such files (fpdf2, python-docx, python-pptx, openpyxl), and the chunks' invariant."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import docx
import openpyxl
import pptx
from fpdf import FPDF
from PIL import Image

from storage import ChunkSpan


def make_pdf(path: Path, pages: Sequence[str], user_password: str | None = None,
             owner_password: str | None = None) -> Path:
    """A PDF with one page per string (left-aligned: justified text gets extra spaces back)."""
    pdf = FPDF()
    if user_password is not None or owner_password is not None:
        pdf.set_encryption(owner_password=owner_password or "owner", user_password=user_password or "")
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 8, text=text, align="L")
    pdf.output(str(path))
    return path


def make_scanned_pdf(path: Path, pages: int) -> Path:
    """A PDF whose pages are pictures only, as a scanner makes them: no text to extract."""
    picture = Image.new("RGB", (200, 100), "white")
    pdf = FPDF()
    for _ in range(pages):
        pdf.add_page()
        pdf.image(picture, x=10, y=10, w=180)
    pdf.output(str(path))
    return path


def make_docx(path: Path, blocks: Sequence[tuple[int, str]]) -> Path:
    """A Word document: (level, text) blocks, level 0 a paragraph, 1-9 a heading."""
    document = docx.Document()
    for level, text in blocks:
        if level:
            document.add_heading(text, level=level)
        else:
            document.add_paragraph(text)
    document.save(str(path))
    return path


def make_pptx(path: Path, slides: Sequence[tuple[str, str]]) -> Path:
    """A presentation of (title, body) slides."""
    presentation = pptx.Presentation()
    for title, body in slides:
        slide = presentation.slides.add_slide(presentation.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
    presentation.save(str(path))
    return path


def make_xlsx(path: Path, sheets: dict[str, list[list[object]]]) -> Path:
    """A workbook: sheet name -> rows, the first the header."""
    workbook = openpyxl.Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(row)
    workbook.save(str(path))
    return path


def assert_chunks_cover(text: str, chunks: Sequence[ChunkSpan]) -> None:
    """The chunks tile the text: in order, from 0 to its end, without gaps or overlaps."""
    assert chunks, "no chunks"
    assert chunks[0].start == 0
    assert chunks[-1].end == len(text)
    for before, after in zip(chunks, chunks[1:]):
        assert before.end == after.start, (before, after)
    assert all(chunk.end > chunk.start for chunk in chunks)
