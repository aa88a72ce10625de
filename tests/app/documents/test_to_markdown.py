"""DOCX, PPTX, XLSX and HTML through markitdown: Markdown with headings, slides as pages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from app.documents import DocumentError, extract_document
from tests.support.document_files import assert_chunks_cover, make_docx, make_pptx, make_xlsx


def test_a_word_document_becomes_markdown_chunked_under_its_headings(tmp_path):
    body = "We measured the throughput of the engine on many chats at once. " * 30
    path = make_docx(tmp_path / "report.docx", [
        (1, "Annual report"), (0, "An opening paragraph."), (2, "Methods"), (0, body),
        (2, "Results"), (0, "It went well."),
    ])
    document = extract_document(path)
    assert document.text.startswith("# Annual report\n\nAn opening paragraph.\n\n## Methods\n\n")
    assert "## Results\n\nIt went well." in document.text
    assert document.pages is None
    assert document.mime == "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    assert_chunks_cover(document.text, document.chunks)
    headings = [c.heading for c in document.chunks]
    assert headings[0] == "Annual report" and headings[-1] == "Annual report › Results"  # the path of headings
    assert headings.count("Annual report › Methods") >= 2  # the long section took more than one chunk


def test_a_presentation_numbers_its_slides_as_pages(tmp_path):
    path = make_pptx(tmp_path / "talk.pptx", [("Welcome", "Who we are"), ("Plans", "What comes next"),
                                              ("Questions", "Ask away")])
    document = extract_document(path)
    assert document.pages == 3
    assert "<!-- Slide number: 2 -->" in document.text and "What comes next" in document.text
    assert [(c.page, c.heading) for c in document.chunks] == [(1, "Welcome"), (2, "Plans"), (3, "Questions")]
    assert "Ask away" in document.text[document.chunks[2].start:document.chunks[2].end]


def test_a_workbook_gives_a_table_under_each_sheet_name(tmp_path):
    path = make_xlsx(tmp_path / "stock.xlsx", {
        "Prices": [["item", "price"], ["apple", "cheap"], ["pear", "dear"]],
        "Counts": [["item", "count"], ["apple", 12]],
    })
    document = extract_document(path)
    assert "| apple | cheap |" in document.text and "| pear | dear |" in document.text
    # where each chunk is as the workbook's reader sees it: the sheet, and its rows (the
    # header row 1, as the spreadsheet numbers it)
    assert [c.heading for c in document.chunks] == ["Prices, rows 1–3", "Counts, rows 1–2"]
    assert "| apple | 12 |" in document.text[document.chunks[1].start:]


def test_a_long_sheet_s_chunks_say_which_rows_each_holds(tmp_path):
    rows = [["item", "note"], *([f"item {i}", "a note long enough to fill the chunks quickly " * 2] for i in range(60))]
    document = extract_document(make_xlsx(tmp_path / "long.xlsx", {"Stock": rows}))
    places = [c.heading for c in document.chunks]
    assert len(places) > 3 and places[0].startswith("Stock, rows 1–") and places[-1].endswith("–61")
    for chunk, place in zip(document.chunks, places):  # each names the rows it holds
        first, last = (int(n) for n in place.removeprefix("Stock, rows ").split("–"))
        text = document.text[chunk.start:chunk.end]
        assert f"| item {max(first - 2, 0)} |" in text or first == 1
        assert f"| item {last - 2} |" in text


def test_an_html_page_loses_its_scripts_and_keeps_its_headings(tmp_path):
    path = tmp_path / "page.html"
    path.write_text("<html><head><title>T</title><style>p {color: red}</style></head><body>"
                    "<h1>Main</h1><p>Hello <b>world</b></p><script>var secret = 1;</script>"
                    "<h2>Sub</h2><p>More words</p></body></html>")
    document = extract_document(path)
    assert document.text == "# Main\n\nHello **world**\n\n## Sub\n\nMore words"
    assert [c.heading for c in document.chunks] == ["Main", "Main › Sub"]
    assert document.mime == "text/html"


def test_an_html_page_in_a_one_byte_encoding_keeps_its_letters(tmp_path):
    path = tmp_path / "seite.htm"
    words = "Grüße aus Köln, über die Brücke und zurück. Die Straße ist naß und früh. " * 5
    path.write_bytes(f"<html><body><p>{words}</p></body></html>".encode("cp1252"))
    assert extract_document(path).text == words.strip()


@pytest.mark.parametrize(("name", "label"), [
    ("report.docx", "a Word document"), ("talk.pptx", "a PowerPoint presentation"), ("stock.xlsx", "an Excel workbook"),
])
def test_a_text_file_named_as_an_office_file_is_refused_in_one_line(tmp_path, name, label):
    path = tmp_path / name
    path.write_text("not a zip at all\n")
    with pytest.raises(DocumentError) as caught:
        extract_document(path)
    assert str(caught.value).startswith(f"{name} is damaged or not {label}: ")
    assert "\n" not in str(caught.value)


def test_a_word_document_cut_short_is_refused(tmp_path):
    whole = make_docx(tmp_path / "whole.docx", [(1, "Title"), (0, "Body")]).read_bytes()
    path = tmp_path / "cut.docx"
    path.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(DocumentError, match=r"^cut\.docx is damaged or not a Word document: "):
        extract_document(path)


def test_an_empty_word_document_has_no_text(tmp_path):
    path = make_docx(tmp_path / "blank.docx", [])
    with pytest.raises(DocumentError, match=r"^blank\.docx has no text in it$"):
        extract_document(path)


def test_a_missing_converter_library_is_said_so_not_called_damage(tmp_path):
    """As in a bundle built without pandas: a fresh interpreter in which it cannot be imported."""
    path = make_xlsx(tmp_path / "stock.xlsx", {"Prices": [["item"], ["apple"]]})
    script = ("import sys; sys.modules['pandas'] = None\n"  # import pandas now raises ImportError
              "from pathlib import Path\n"
              "from app.documents import DocumentError, extract_document\n"
              "try:\n"
              f"    extract_document(Path({str(path)!r}))\n"
              "except DocumentError as error:\n"
              "    print(error)\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).parents[3])
    assert done.stdout.strip() == ("stock.xlsx cannot be read: this Chorus lacks the library that reads "
                                   "an Excel workbook (markitdown[xlsx])")


def test_an_office_file_that_unpacks_past_the_limit_is_refused_before_it_is_parsed(tmp_path):
    """A zip bomb: a small DOCX whose one XML part is 150 MB of spaces once unpacked. Refused
    from the zip's directory, in a line that says why (it passed 3 GB of memory before)."""
    import zipfile

    path = make_docx(tmp_path / "bomb.docx", [(0, "Hello.")])
    with zipfile.ZipFile(path, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("word/padding.xml", "w", force_zip64=True) as part:
            block = b" " * (1024 * 1024)
            for _ in range(150):
                part.write(block)
    assert path.stat().st_size < 2 * 1024 * 1024
    refused = r"^bomb\.docx unpacks to 15\d MB; the most a document may hold unpacked is 100 MB$"
    with pytest.raises(DocumentError, match=refused):
        extract_document(path)
