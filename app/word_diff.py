"""Word-level differences between two answers, for the compare view.

Texts are split into words, punctuation and whitespace runs, so a diff never cuts a word in
half and the runs put back together give both texts exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from enum import Enum

_PIECES = re.compile(r"\s+|\w+|[^\w\s]")


class Op(str, Enum):
    EQUAL = "equal"
    DELETE = "delete"  # only in the first text
    INSERT = "insert"  # only in the second text


@dataclass(frozen=True, slots=True)
class Run:
    op: Op
    text: str


@dataclass(frozen=True, slots=True)
class WordDiff:
    runs: tuple[Run, ...]
    similarity: float  # 0..1: the share of words both texts have, in order

    def old_text(self) -> str:
        return "".join(r.text for r in self.runs if r.op is not Op.INSERT)

    def new_text(self) -> str:
        return "".join(r.text for r in self.runs if r.op is not Op.DELETE)


def pieces(text: str) -> list[str]:
    return _PIECES.findall(text)


def diff_words(old: str, new: str) -> WordDiff:
    a, b = pieces(old), pieces(new)
    # autojunk off: short answers repeat common words, which must still match.
    matcher = SequenceMatcher(a=a, b=b, autojunk=False)
    runs: list[Run] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            _add(runs, Op.EQUAL, "".join(a[i1:i2]))
        else:
            _add(runs, Op.DELETE, "".join(a[i1:i2]))
            _add(runs, Op.INSERT, "".join(b[j1:j2]))
    return WordDiff(tuple(runs), _word_similarity(a, b))


def _add(runs: list[Run], op: Op, text: str) -> None:
    if not text:
        return
    if runs and runs[-1].op is op:
        runs[-1] = Run(op, runs[-1].text + text)
    else:
        runs.append(Run(op, text))


def _word_similarity(a: list[str], b: list[str]) -> float:
    """Whitespace left out, so layout alone never makes two answers look alike."""
    wa = [p for p in a if not p.isspace()]
    wb = [p for p in b if not p.isspace()]
    if not wa and not wb:
        return 1.0
    return SequenceMatcher(a=wa, b=wb, autojunk=False).ratio()
