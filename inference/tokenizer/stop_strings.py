"""Holds back generated text that might be the start of a stop string."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class StopResult:
    text: str  # text safe to emit now
    stopped: bool


class StopStringMatcher:
    """Streams text out, cutting it at the first stop string.

    Text that could still grow into a stop string is withheld until it either
    completes one (and is dropped) or cannot any more (and is released).
    """

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = tuple(s for s in stops if s)
        self._held = ""
        self.matched: str | None = None  # the stop string that ended the text, once one did

    @property
    def active(self) -> bool:
        """False without stop strings: push would return its text unchanged."""
        return bool(self._stops)

    def push(self, text: str) -> StopResult:
        if not self._stops:
            return StopResult(text, False)
        buf = self._held + text
        first = self._first_stop(buf)
        if first is not None:
            cut, self.matched = first
            self._held = ""
            return StopResult(buf[:cut], True)
        keep = self._partial_suffix_len(buf)
        self._held = buf[len(buf) - keep :] if keep else ""
        return StopResult(buf[: len(buf) - keep], False)

    def flush(self) -> str:
        held, self._held = self._held, ""
        return held

    def _first_stop(self, buf: str) -> tuple[int, str] | None:
        """Where the earliest stop string in buf starts, and which one it is."""
        hits = [(i, s) for s, i in ((s, buf.find(s)) for s in self._stops) if i >= 0]
        return min(hits) if hits else None

    def _partial_suffix_len(self, buf: str) -> int:
        """Length of the longest suffix of buf that is a proper prefix of a stop string."""
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(buf)), best, -1):
                if buf.endswith(stop[:n]):
                    best = n
                    break
        return best
