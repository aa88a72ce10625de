"""Text as plain runs and control tokens: llama.cpp's special partition, done in Python.

The prompt tokenizer applies it to a chat template's markup only, so that control-token
strings in message text stay text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from inference.tokenizer.vocab import SpecialToken


@dataclass(frozen=True, slots=True)
class Special:
    token: int
    lstrip: bool
    rstrip: bool


# A prompt piece: plain text (tokenized without parse_special) or one special token.
Piece = str | Special


class SpecialMatcher:
    """Finds control-token strings in text, longest first at each position."""

    def __init__(self, specials: list[SpecialToken]) -> None:
        # Only those parse_special gates: tokenizing text matches the others anyway, also
        # across the seams of markup and content, as tokenizing the whole render did.
        self._by_text = {s.text: Special(s.token, s.lstrip, s.rstrip) for s in specials if s.control}
        lengths: dict[str, set[int]] = {}
        for text in self._by_text:
            lengths.setdefault(text[0], set()).add(len(text))
        # first character -> the lengths to try there, longest first
        self._lengths = {c: sorted(ls, reverse=True) for c, ls in lengths.items()}
        starts = "".join(re.escape(c) for c in self._lengths)
        self._candidates = re.compile(f"[{starts}]") if starts else None
        self._cache: dict[str, list[Piece]] = {}

    def split(self, text: str) -> list[Piece]:
        """text as plain-text runs and special tokens, in order."""
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        pieces: list[Piece] = []
        done = 0
        if self._candidates is not None:
            for m in self._candidates.finditer(text):
                pos = m.start()
                if pos < done:
                    continue
                special = self._special_at(text, pos)
                if special is None:
                    continue
                text_len, token = special
                if pos > done:
                    pieces.append(text[done:pos])
                pieces.append(token)
                done = pos + text_len
        if done < len(text):
            pieces.append(text[done:])
        if len(self._cache) < 4096:  # markup repeats: the same few strings every turn
            self._cache[text] = pieces
        return pieces

    def _special_at(self, text: str, pos: int) -> tuple[int, Special] | None:
        for n in self._lengths[text[pos]]:
            token = self._by_text.get(text[pos : pos + n])
            if token is not None:
                return n, token
        return None


def merge_runs(pieces: list[Piece]) -> list[Piece]:
    """Adjacent text joined into one run (as llama.cpp tokenizes it), whitespace next to
    an lstrip/rstrip special token dropped (as its partition does)."""
    runs: list[Piece] = []
    for piece in pieces:
        if isinstance(piece, str) and runs and isinstance(runs[-1], str):
            runs[-1] += piece
        else:
            runs.append(piece)
    for i, run in enumerate(runs):
        if not isinstance(run, Special):
            continue
        if run.lstrip and i > 0 and isinstance(runs[i - 1], str):
            runs[i - 1] = str(runs[i - 1]).rstrip()
        if run.rstrip and i + 1 < len(runs) and isinstance(runs[i + 1], str):
            runs[i + 1] = str(runs[i + 1]).lstrip()
    return runs
