"""The two ways extracting a file ends without a document."""

from __future__ import annotations

import threading


class DocumentError(Exception):
    """A file that cannot become a document. The message is one line that names the file,
    fit to show the user as it is ("notes.txt is empty")."""


class ExtractionCancelled(Exception):
    """The caller set its cancel event while the file was being extracted."""


def raise_if_cancelled(cancel: threading.Event | None, name: str) -> None:
    if cancel is not None and cancel.is_set():
        raise ExtractionCancelled(f"reading {name} was cancelled")


def one_line(exc: BaseException, limit: int = 120) -> str:
    """A third-party exception's message as a short single line, for the end of ours."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"
