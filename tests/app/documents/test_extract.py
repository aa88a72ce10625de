"""extract_document: every format to a NewDocument, through the package's door."""

from __future__ import annotations

import hashlib
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from app.documents import SUPPORTED_SUFFIXES, DocumentError, ExtractionCancelled, extract_document
from storage import NewDocument
from tests.support.document_files import assert_chunks_cover, make_docx, make_pdf, make_pptx, make_xlsx


def extracted(path: Path, text: str) -> NewDocument:
    path.write_text(text)
    return extract_document(path)


def test_a_markdown_file_is_kept_verbatim_and_chunked_under_its_headings(tmp_path):
    text = "# Guide\n\nRead me first.\n\n## Install\n\nRun `make`.\n\n```sh\n# not a heading\n```\n"
    path = tmp_path / "guide.md"
    document = extracted(path, text)
    assert document.text == text
    assert (document.name, document.mime, document.pages) == ("guide.md", "text/markdown", None)
    assert document.size_bytes == len(text.encode())
    assert document.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [c.heading for c in document.chunks] == ["Guide", "Guide › Install"]  # the path of headings
    assert_chunks_cover(document.text, document.chunks)


def test_source_code_keeps_its_comments_out_of_the_headings(tmp_path):
    code = "import sys\n\n# Main entry\n\ndef main():\n    print(sys.argv)\n"
    document = extracted(tmp_path / "tool.py", code)
    assert document.text == code
    assert [c.heading for c in document.chunks] == [""]


@pytest.mark.parametrize(("name", "content", "mime"), [
    ("prices.csv", "item,price\napple,1.5\npear,2\n", "text/csv"),
    ("config.json", json.dumps({"name": "chorus", "layers": ["ui", "app"]}, indent=2), "application/json"),
    ("settings.yaml", "model: smollm\nthreads: 4\n", "text/plain"),
    ("main.rs", "fn main() {\n    println!(\"hi\");\n}\n", "text/plain"),
    ("Makefile", "test:\n\tpytest\n", "text/plain"),
    (".gitignore", "*.pyc\n.venv/\n", "text/plain"),
])
def test_text_formats_are_read_as_they_are(tmp_path, name, content, mime):
    document = extracted(tmp_path / name, content)
    assert (document.text, document.mime) == (content, mime)


def test_an_unsupported_type_is_refused_naming_what_is_supported(tmp_path):
    path = tmp_path / "setup.exe"
    path.write_bytes(b"MZ\x90\x00")
    with pytest.raises(DocumentError) as caught:
        extract_document(path)
    message = str(caught.value)
    assert message.startswith("setup.exe: Chorus cannot read this type .exe; it reads text, Markdown")
    assert "PDF" in message and "\n" not in message


def test_the_supported_suffixes_are_those_read(tmp_path):
    assert {".txt", ".md", ".py", ".csv", ".json", ".html", ".pdf", ".docx", ".pptx", ".xlsx"} <= SUPPORTED_SUFFIXES
    assert ".exe" not in SUPPORTED_SUFFIXES


def test_progress_grows_to_one_for_every_format(tmp_path):
    files = [
        make_pdf(tmp_path / "a.pdf", ["One", "Two", "Three"]),
        make_docx(tmp_path / "a.docx", [(1, "Title"), (0, "Body")]),
        make_pptx(tmp_path / "a.pptx", [("Slide", "Body")]),
        make_xlsx(tmp_path / "a.xlsx", {"Sheet": [["a", "b"], [1, 2]]}),
    ]
    (tmp_path / "a.txt").write_text("text")
    for path in [*files, tmp_path / "a.txt"]:
        seen: list[float] = []
        extract_document(path, progress=seen.append)
        assert seen == sorted(seen) and seen[-1] == 1.0, path.name


def test_a_cancel_set_before_the_start_reads_nothing(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("text")
    cancel = threading.Event()
    cancel.set()
    seen: list[float] = []
    with pytest.raises(ExtractionCancelled):
        extract_document(path, cancel, seen.append)
    assert seen == []


def test_documents_extract_side_by_side_on_many_threads(tmp_path):
    files = [make_pdf(tmp_path / f"p{i}.pdf", [f"Document {i} page {n}" for n in range(1, 4)]) for i in range(4)]
    files += [make_docx(tmp_path / f"d{i}.docx", [(1, f"Doc {i}"), (0, "Body text")]) for i in range(2)]
    alone = [extract_document(path) for path in files]
    with ThreadPoolExecutor(max_workers=len(files)) as pool:
        together = list(pool.map(extract_document, files))
    assert together == alone
    assert together[2].text.startswith("Document 2 page 1")
