"""A reply's text as it streams, held once per process: the thread that reads the engine's
deltas appends to it, and whoever shows or saves the reply reads it there (the desktop's
stream presenter draws what follows what it has drawn, the reply recorder saves the whole
text, a view opened mid-reply starts from it).

Positions are offsets in characters from the start of the text: one reader keeps the end of
what it has drawn and asks for what came after it, instead of keeping a copy of the text.
Appends are cheap (a piece added to a list, under a lock), so the reader thread never waits
long on a reader; the pieces are joined when a reader asks, each character into one string.
"""

from __future__ import annotations

import threading


class ReplyText:
    def __init__(self, text: str = "") -> None:
        """text: what the message already holds (a continued reply)."""
        self._text = text  # the pieces joined so far
        self._pieces: list[str] = []  # appended since, not yet joined
        self._end = len(text)
        self._lock = threading.Lock()

    def append(self, piece: str) -> None:
        """From any thread (the deltas' reader thread)."""
        if not piece:
            return
        with self._lock:
            self._pieces.append(piece)
            self._end += len(piece)

    @property
    def end(self) -> int:
        """The position after the last character: how long the text is now."""
        with self._lock:
            return self._end

    def __len__(self) -> int:
        return self.end

    def text(self) -> str:
        """The whole text so far."""
        with self._lock:
            return self._joined()

    def upto(self) -> tuple[str, int]:
        """The whole text and its end, read at once: a reader that shows it goes on from there."""
        with self._lock:
            return self._joined(), self._end

    def since(self, position: int) -> tuple[str, int]:
        """The text after position and the position after it, read at once: what a reader
        that has shown the text up to position has still to show, and where it is then."""
        with self._lock:
            if position >= self._end:
                return "", self._end
            joined = len(self._text)
            if position < joined:
                return self._joined()[position:], self._end
            # The common case (a frame's new text): only the pieces since the last read are
            # joined, into one piece, so a long reply is not copied again every frame.
            tail = "".join(self._pieces)
            self._pieces[:] = [tail]
            return tail[position - joined:], self._end

    def _joined(self) -> str:
        if self._pieces:
            self._text += "".join(self._pieces)
            self._pieces.clear()
        return self._text

    def __repr__(self) -> str:
        return f"ReplyText({self.end} characters)"
