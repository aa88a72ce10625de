"""Turns token pieces (bytes) into text deltas that never split a UTF-8 character."""

from __future__ import annotations

import codecs


class IncrementalDetokenizer:
    """Feeds token bytes; returns only complete characters.

    A multi-byte character split across tokens is held until its last byte arrives.
    Invalid sequences become U+FFFD rather than an exception.
    """

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def feed(self, piece: bytes) -> str:
        return self._decoder.decode(piece)

    def flush(self) -> str:
        return self._decoder.decode(b"", final=True)
