"""read_file_bytes: a file read once, whole, or one line saying why not."""

from __future__ import annotations

import os
import threading

import pytest

from app.documents import MAX_DOCUMENT_BYTES, DocumentError, ExtractionCancelled, extract_document
from app.documents.file_bytes import read_file_bytes


def test_the_bytes_come_back_whole_with_progress_to_one(tmp_path):
    path = tmp_path / "big.txt"
    data = os.urandom(3 * 1024 * 1024 + 17)
    path.write_bytes(data)
    seen: list[float] = []
    assert read_file_bytes(path, progress=seen.append) == data
    assert seen == sorted(seen) and seen[-1] == 1.0 and len(seen) == 4  # a report per MiB block


def test_an_empty_file_is_refused(tmp_path):
    (tmp_path / "x.txt").write_bytes(b"")
    with pytest.raises(DocumentError, match=r"^x\.txt is empty$"):
        extract_document(tmp_path / "x.txt")


def test_a_file_over_the_limit_fails_before_a_byte_is_read(tmp_path):
    path = tmp_path / "huge.txt"
    with open(path, "wb") as sparse:
        sparse.truncate(500 * 1024 * 1024)  # sparse: 500 MB that take no disk
    assert path.stat().st_size > MAX_DOCUMENT_BYTES
    seen: list[float] = []
    with pytest.raises(DocumentError, match=r"^huge\.txt is too large: 500 MB, the most a document may be is 100 MB$"):
        extract_document(path, progress=seen.append)
    assert seen == []  # no block was read


def test_a_folder_is_refused(tmp_path):
    (tmp_path / "notes.md").mkdir()
    with pytest.raises(DocumentError, match=r"^notes\.md is a folder, not a file$"):
        extract_document(tmp_path / "notes.md")


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(DocumentError, match=r"^gone\.txt does not exist \(moved or deleted\?\)$"):
        extract_document(tmp_path / "gone.txt")


def test_a_fifo_is_refused_without_opening_it(tmp_path):
    path = tmp_path / "pipe.txt"
    os.mkfifo(path)  # open() would wait for a writer forever
    with pytest.raises(DocumentError, match=r"^pipe\.txt is not a regular file$"):
        extract_document(path)


def test_a_file_cut_short_while_it_is_read_is_refused(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(b"line\n" * (1024 * 1024))  # 5 MiB: five blocks

    def truncate_after_first_block(fraction: float) -> None:
        if fraction < 1.0:
            os.truncate(path, 1024)

    with pytest.raises(DocumentError, match=r"^log\.txt changed while it was being read; try again$"):
        read_file_bytes(path, progress=truncate_after_first_block)


def test_a_file_that_grows_while_it_is_read_is_refused(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(b"line\n" * (1024 * 1024))

    def append(fraction: float) -> None:
        with open(path, "ab") as more:
            more.write(b"x" * 4096)

    with pytest.raises(DocumentError, match="changed while it was being read"):
        read_file_bytes(path, progress=append)


def test_a_cancel_between_blocks_stops_the_read(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes(b"line\n" * (1024 * 1024))
    cancel = threading.Event()
    seen: list[float] = []

    def cancel_at_once(fraction: float) -> None:
        seen.append(fraction)
        cancel.set()

    with pytest.raises(ExtractionCancelled, match="log.txt"):
        read_file_bytes(path, cancel, cancel_at_once)
    assert len(seen) == 1
