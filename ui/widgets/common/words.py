"""Text cut to a width at the end of a word: "List three tips for…", never "List three tips
for learnin…" (a cut word reads as a typo). Tabs, sidebar rows and attachment chips use it."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontMetrics


def elided_at_a_word(metrics: QFontMetrics, text: str, room: int) -> str:
    """`text` whole if it fits in `room` pixels, else its longest run of whole words that fits
    with "…" after it (Qt's own cut where even the first word does not fit)."""
    return at_a_word(text, metrics.elidedText(text, Qt.TextElideMode.ElideRight, room))


def at_a_word(line: str, elided: str) -> str:
    """An elided line cut back to the end of its last whole word, unless that leaves no word
    at all."""
    if elided == line or not elided.endswith("…"):
        return elided
    kept = elided[:-1]
    if len(kept) < len(line) and not line[len(kept)].isspace() and " " in kept.strip():
        kept = kept[: kept.rstrip().rfind(" ")]
    return kept.rstrip(" ·,:;(") + "…"
