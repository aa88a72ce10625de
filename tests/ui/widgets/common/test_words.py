"""Text cut at the end of a word (ui/widgets/common/words.py): tabs, sidebar rows and
attachment chips never show "learnin…"."""

from __future__ import annotations

from PySide6.QtGui import QFont, QFontMetrics

from ui.widgets.common.words import elided_at_a_word


def _metrics(qapp) -> QFontMetrics:
    return QFontMetrics(QFont())


def test_a_title_that_fits_is_whole_and_a_long_one_ends_after_a_whole_word(qapp):
    metrics = _metrics(qapp)
    title = "List three tips for learning to cook"
    assert elided_at_a_word(metrics, title, metrics.horizontalAdvance(title) + 2) == title
    for room in range(metrics.horizontalAdvance("List three…"), metrics.horizontalAdvance(title), 7):
        shown = elided_at_a_word(metrics, title, room)
        kept = shown.removesuffix("…")
        assert shown.endswith("…") and title.startswith(kept) and title[len(kept)] == " ", (room, shown)
        assert metrics.horizontalAdvance(shown) <= room


def test_one_word_longer_than_the_room_is_cut_as_qt_cuts_it(qapp):
    metrics = _metrics(qapp)
    word = "Supercalifragilisticexpialidocious"
    shown = elided_at_a_word(metrics, word, metrics.horizontalAdvance(word) // 2)
    assert shown.endswith("…") and word.startswith(shown[:-1]) and len(shown) > 3


def test_punctuation_before_the_cut_goes_with_it(qapp):
    metrics = _metrics(qapp)
    title = "Tokens, batches; and a queue"
    shown = elided_at_a_word(metrics, title, metrics.horizontalAdvance("Tokens, batches; and…") + 1)
    assert shown == "Tokens, batches; and…"
    shown = elided_at_a_word(metrics, title, metrics.horizontalAdvance("Tokens, batches;…") + 1)
    assert shown == "Tokens, batches…"
