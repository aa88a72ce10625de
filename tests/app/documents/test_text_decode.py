"""Text files: decoded in their own encoding and kept verbatim, binary files refused."""

from __future__ import annotations

import codecs

import pytest

from app.documents import DocumentError, extract_document

GERMAN = ("Grüße aus Köln. Die Straße ist naß, der Bäcker öffnet früh, und über die Brücke "
          "fahren Autos. Später regnet es wieder, aber das macht nichts.\r\n") * 4


def test_utf8_text_is_kept_verbatim_carriage_returns_and_all(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(GERMAN.encode("utf-8"))
    assert extract_document(path).text == GERMAN


@pytest.mark.parametrize("encoding", ["cp1252", "utf-16", "utf-8-sig"])
def test_other_encodings_are_recognised(tmp_path, encoding):
    path = tmp_path / "notes.txt"
    path.write_bytes(GERMAN.encode(encoding))
    assert extract_document(path).text == GERMAN


def test_utf16_without_its_mark_is_binary_to_us(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(GERMAN.encode("utf-16-le"))
    with pytest.raises(DocumentError, match=r"^notes\.txt is not a text file: it holds binary data$"):
        extract_document(path)


def test_a_binary_file_with_a_text_suffix_is_refused(tmp_path):
    path = tmp_path / "photo.txt"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8)
    with pytest.raises(DocumentError, match=r"^photo\.txt is not a text file: it holds binary data$"):
        extract_document(path)


def test_a_broken_utf16_file_says_so(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(codecs.BOM_UTF16_LE + b"a\x00b")  # an odd byte out
    with pytest.raises(DocumentError, match=r"^notes\.txt is not valid UTF-16 text$"):
        extract_document(path)


def test_a_file_of_blank_space_has_no_text(tmp_path):
    path = tmp_path / "blank.md"
    path.write_bytes(b"\n\n   \n\t\n")
    with pytest.raises(DocumentError, match=r"^blank\.md has no text in it$"):
        extract_document(path)
