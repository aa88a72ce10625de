"""PDFs: text page by page, chunks that know their page, and every way a PDF can fail."""

from __future__ import annotations

import hashlib
import threading

import pytest

from app.documents import DocumentError, ExtractionCancelled, extract_document
from app.documents.pdf import pdf_pages
from tests.support.document_files import assert_chunks_cover, make_pdf, make_scanned_pdf

PARAGRAPH = "The quick brown fox jumps over the lazy dog near the river bank. "


def page_text(number: int) -> str:
    return f"Page {number} begins here. " + PARAGRAPH * 6


def test_a_twenty_page_pdf_gives_its_text_and_a_page_for_every_chunk(tmp_path):
    path = make_pdf(tmp_path / "report.pdf", [page_text(n) for n in range(1, 21)])
    document = extract_document(path)
    assert (document.pages, document.mime, document.name) == (20, "application/pdf", "report.pdf")
    assert document.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert_chunks_cover(document.text, document.chunks)
    assert sorted({c.page for c in document.chunks}) == list(range(1, 21))
    for chunk in document.chunks:
        assert f"Page {chunk.page} begins here." in document.text[chunk.start:chunk.end]


def test_pages_come_back_one_by_one_without_form_feeds(tmp_path):
    path = make_pdf(tmp_path / "two.pdf", ["First page.", "Second page."])
    assert pdf_pages(path.read_bytes(), "two.pdf") == ["First page.", "Second page."]
    assert extract_document(path).text == "First page.\n\nSecond page."


def test_a_blank_page_keeps_the_numbers_of_the_pages_after_it(tmp_path):
    path = make_pdf(tmp_path / "gap.pdf", ["Opening words.", "", "Closing words."])
    document = extract_document(path)
    assert document.pages == 3
    assert [(document.text[c.start:c.end].strip(), c.page) for c in document.chunks] == [
        ("Opening words.", 1), ("Closing words.", 3)]


def test_progress_is_reported_for_every_page(tmp_path):
    path = make_pdf(tmp_path / "ten.pdf", [page_text(n) for n in range(10)])
    seen: list[float] = []
    extract_document(path, progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == 1.0
    assert len(seen) >= 10 + 1
    page_reports: list[float] = []
    pdf_pages(path.read_bytes(), "ten.pdf", progress=page_reports.append)
    assert page_reports == pytest.approx([n / 10 for n in range(1, 11)])


def test_a_cancel_between_pages_stops_the_reading(tmp_path):
    path = make_pdf(tmp_path / "long.pdf", [page_text(n) for n in range(10)])
    cancel = threading.Event()
    pages_read: list[float] = []

    def cancel_after_three_pages(fraction: float) -> None:
        pages_read.append(fraction)
        if len(pages_read) == 3:
            cancel.set()

    with pytest.raises(ExtractionCancelled, match="long.pdf"):
        pdf_pages(path.read_bytes(), "long.pdf", cancel, cancel_after_three_pages)
    assert len(pages_read) == 3  # page 4 was never read


def test_a_cancel_mid_pdf_through_the_door_raises_cancelled(tmp_path):
    path = make_pdf(tmp_path / "long.pdf", [page_text(n) for n in range(10)])
    cancel = threading.Event()

    def cancel_half_way(fraction: float) -> None:
        if fraction >= 0.5:
            cancel.set()

    with pytest.raises(ExtractionCancelled):
        extract_document(path, cancel, cancel_half_way)


def test_a_pdf_that_needs_a_password_is_refused_as_encrypted(tmp_path):
    path = make_pdf(tmp_path / "secret.pdf", ["Hidden words."], user_password="letmein")
    with pytest.raises(DocumentError, match=r"^secret\.pdf is encrypted: it needs a password to open$"):
        extract_document(path)


def test_a_pdf_encrypted_with_no_user_password_is_read(tmp_path):
    path = make_pdf(tmp_path / "locked.pdf", ["Readable words."], owner_password="boss")
    assert b"/Encrypt" in path.read_bytes()
    assert extract_document(path).text == "Readable words."


def test_a_pdf_cut_short_is_damaged(tmp_path):
    whole = make_pdf(tmp_path / "whole.pdf", [page_text(n) for n in range(3)]).read_bytes()
    path = tmp_path / "cut.pdf"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DocumentError, match=r"^cut\.pdf is damaged: it is cut short \(no end-of-file marker\)$"):
        extract_document(path)


def test_a_pdf_whose_page_tree_lost_a_page_is_damaged(tmp_path):
    whole = make_pdf(tmp_path / "whole.pdf", [page_text(n) for n in range(3)]).read_bytes()
    assert b"7 0 R]" in whole
    path = tmp_path / "torn.pdf"
    path.write_bytes(whole.replace(b"7 0 R]", b"77 0 R]", 1))
    with pytest.raises(DocumentError, match=r"^torn\.pdf is damaged: 2 of its 3 pages could be found$"):
        extract_document(path)


def test_a_pdf_without_its_catalog_is_damaged_in_one_line(tmp_path):
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\nnothing of a PDF in here\n%%EOF\n")
    with pytest.raises(DocumentError) as caught:
        extract_document(path)
    assert str(caught.value).startswith("broken.pdf is damaged: ")
    assert "\n" not in str(caught.value)


def test_a_file_named_pdf_that_is_none_says_so(tmp_path):
    path = tmp_path / "fake.pdf"
    path.write_text("just some words\n")
    with pytest.raises(DocumentError, match=r"^fake\.pdf is not a PDF \(it has no PDF header\)$"):
        extract_document(path)


def test_a_scanned_pdf_has_no_text_and_says_why(tmp_path):
    make_scanned_pdf(tmp_path / "scan.pdf", pages=2)
    with pytest.raises(DocumentError, match=r"^scan\.pdf has no text to extract: its pages are images"):
        extract_document(tmp_path / "scan.pdf")


def test_a_page_tree_without_a_count_still_moves_the_progress(tmp_path):
    whole = make_pdf(tmp_path / "whole.pdf", ["One.", "Two.", "Three."]).read_bytes()
    assert b"/Count 3\n" in whole
    uncounted = whole.replace(b"/Count 3\n", b"/Xount 3\n", 1)  # same length: the xref offsets hold
    seen: list[float] = []
    assert pdf_pages(uncounted, "uncounted.pdf", progress=seen.append) == ["One.", "Two.", "Three."]
    assert seen == pytest.approx([1 / 2, 2 / 3, 3 / 4])


def test_a_pdf_without_a_single_page_object_is_damaged(tmp_path):
    whole = make_pdf(tmp_path / "whole.pdf", ["One.", "Two."]).read_bytes()
    assert whole.count(b"/Type /Page\n") == 2
    path = tmp_path / "pageless.pdf"
    # Same lengths, so the offsets hold: no page object, and no count to compare with.
    path.write_bytes(whole.replace(b"/Type /Page\n", b"/Type /Xage\n").replace(b"/Count 2", b"/Xount 2"))
    with pytest.raises(DocumentError, match=r"^pageless\.pdf is damaged: no pages could be found in it$"):
        extract_document(path)
