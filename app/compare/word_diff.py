"""Word-level differences between two answers, for the compare view.

Texts are split into words, punctuation and whitespace runs, so a diff never cuts a word in
half and the runs put back together give both texts exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from enum import Enum

# A word or a punctuation mark with the whitespace after it; leading whitespace alone.
_PIECES = re.compile(r"\w+\s*|[^\w\s]\s*|\s+")


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
    # Words are compared without their spacing, so layout alone never makes a difference.
    # autojunk stays on: with it off, long answers full of repeated words took seconds
    # (1,000 words: 3.5 s; 3,000: 100 s); frequent words still match next to rare ones.
    ka, kb = [p.strip() or p for p in a], [p.strip() or p for p in b]
    matcher = SequenceMatcher(a=ka, b=kb, autojunk=True)
    runs: list[Run] = []
    matched = 0
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            matched += sum(1 for k in ka[i1:i2] if not k.isspace())
            for old_piece, new_piece in zip(a[i1:i2], b[j1:j2]):
                _add_equal(runs, old_piece, new_piece)
        else:
            _add_change(runs, "".join(a[i1:i2]), "".join(b[j1:j2]))
    words = sum(1 for k in ka if not k.isspace()) + sum(1 for k in kb if not k.isspace())
    return WordDiff(tuple(runs), 2.0 * matched / words if words else 1.0)


def _add_equal(runs: list[Run], old: str, new: str) -> None:
    """The same word; its spacing may differ (kept exactly on both sides)."""
    word = old.rstrip()
    _add(runs, Op.EQUAL, word)
    old_space, new_space = old[len(word):], new[len(new.rstrip()):]
    if old_space == new_space:
        _add(runs, Op.EQUAL, old_space)
    else:
        _add(runs, Op.DELETE, old_space)
        _add(runs, Op.INSERT, new_space)


def _add_change(runs: list[Run], old: str, new: str) -> None:
    """Changed words; the spacing after them stays out of the change when both sides end
    the same way."""
    old_core, new_core = old.rstrip(), new.rstrip()
    old_tail, new_tail = old[len(old_core):], new[len(new_core):]
    if old_core and new_core and old_tail == new_tail:
        _add(runs, Op.DELETE, old_core)
        _add(runs, Op.INSERT, new_core)
        _add(runs, Op.EQUAL, old_tail)
    else:
        _add(runs, Op.DELETE, old)
        _add(runs, Op.INSERT, new)


def _add(runs: list[Run], op: Op, text: str) -> None:
    if not text:
        return
    if runs and runs[-1].op is op:
        runs[-1] = Run(op, runs[-1].text + text)
    else:
        runs.append(Run(op, text))
