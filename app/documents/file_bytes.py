"""A file's bytes, read once, with every way that can go wrong said in one line."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from app.documents.errors import DocumentError, raise_if_cancelled

# A document goes whole into SQLite and its text into the prompt: past this a file is more
# likely a data dump or a disk image than something to ask a model about.
MAX_DOCUMENT_BYTES = 100 * 1024 * 1024

_BLOCK = 1024 * 1024


def read_file_bytes(path: Path, cancel: threading.Event | None = None,
                    progress: Callable[[float], None] | None = None) -> bytes:
    """The whole file, checked before a byte is read (a folder, a device, empty, too big)
    and after (it changed size while being read). progress gets the fraction read."""
    name = path.name
    try:
        # The path first: open() itself would hang on a FIFO.
        _check_kind(path.stat(), name)
        with open(path, "rb") as stream:
            # Then the very file opened, which may have been replaced in between.
            info = os.fstat(stream.fileno())
            _check_kind(info, name)
            _check_size(info.st_size, name)
            data = _read_blocks(stream, info.st_size, name, cancel, progress)
    except IsADirectoryError:
        raise DocumentError(f"{name} is a folder, not a file") from None
    except FileNotFoundError:
        raise DocumentError(f"{name} does not exist (moved or deleted?)") from None
    except PermissionError:
        raise DocumentError(f"{name} cannot be read: permission denied") from None
    except OSError as exc:
        raise DocumentError(f"{name} could not be read: {exc.strerror or exc}") from None
    if len(data) != info.st_size:
        raise DocumentError(f"{name} changed while it was being read; try again")
    return data


def _check_kind(info: os.stat_result, name: str) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError
    if not stat.S_ISREG(info.st_mode):
        raise DocumentError(f"{name} is not a regular file")


def _check_size(size: int, name: str) -> None:
    if size == 0:
        raise DocumentError(f"{name} is empty")
    if size > MAX_DOCUMENT_BYTES:
        raise DocumentError(f"{name} is too large: {megabytes(size)}, "
                            f"the most a document may be is {megabytes(MAX_DOCUMENT_BYTES)}")


def _read_blocks(stream: BinaryIO, size: int, name: str, cancel: threading.Event | None,
                 progress: Callable[[float], None] | None) -> bytes:
    blocks: list[bytes] = []
    got = 0
    # Up to one byte past the size: a file that grew while being read is caught too.
    while got <= size:
        raise_if_cancelled(cancel, name)
        block = stream.read(min(_BLOCK, size + 1 - got))
        if not block:
            break
        blocks.append(block)
        got += len(block)
        if progress is not None:
            progress(min(got / size, 1.0))
    return b"".join(blocks)


def megabytes(count: int) -> str:
    return f"{count / (1024 * 1024):.0f} MB"
