"""The chips under a message's text: a user message's attached documents (name, pages,
characters) and a reply's sources ("[1] report.pdf p.3", the ones it cites in bold with an
accent edge). Laid out, painted and hit-tested here for the delegate, in the coordinates
of the chip area's top-left corner."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette

from storage import AttachmentRecord, SourceRecord
from ui.widgets.chat.document_labels import document_details, source_label
from ui.widgets.chat.message_model import MessageView
from ui.widgets.common.glyphs import glyph_pixmap

CHIP_GAP = 6  # between chips, and between the text and the first row of chips
CHIP_PAD = 8
ICON = 14
MAX_CHIP_W = 360


@dataclass(frozen=True, slots=True)
class MessageChip:
    text: str
    target: AttachmentRecord | SourceRecord
    emphasized: bool = False

    @property
    def is_document(self) -> bool:
        return isinstance(self.target, AttachmentRecord)


def message_chips(view: MessageView) -> list[MessageChip]:
    documents = [MessageChip(f"{a.name} · {document_details(a.pages, a.size_bytes, a.chars)}", a)
                 for a in view.attachments]
    sources = [MessageChip(source_label(s), s, emphasized=s.cited) for s in view.sources]
    return documents + sources


def chip_font(font: QFont, emphasized: bool = False) -> QFont:
    small = QFont(font)
    small.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
    small.setBold(emphasized)
    return small


def chip_rects(chips: list[MessageChip], width: int, font: QFont) -> list[QRect]:
    """Each chip's box, left to right, wrapping at width."""
    rects, x, y = [], 0, 0
    for chip in chips:
        fm = QFontMetrics(chip_font(font, chip.emphasized))
        icon = ICON + 4 if chip.is_document else 0
        # A few pixels spare: text measured to the pixel was elided where painted.
        w = min(MAX_CHIP_W, width, fm.horizontalAdvance(chip.text) + icon + 2 * CHIP_PAD + 4)
        h = fm.height() + 8
        if x and x + w > width:
            x, y = 0, y + h + CHIP_GAP
        rects.append(QRect(x, y, w, h))
        x += w + CHIP_GAP
    return rects


def chips_height(chips: list[MessageChip], width: int, font: QFont) -> int:
    """The room under the text (0 without chips)."""
    rects = chip_rects(chips, width, font)
    return max(r.bottom() + 1 for r in rects) + CHIP_GAP if rects else 0


def paint_chips(painter: QPainter, chips: list[MessageChip], width: int, font: QFont, palette: QPalette) -> None:
    text_color = palette.color(QPalette.ColorRole.Text)
    dim = palette.color(QPalette.ColorRole.PlaceholderText)
    accent = palette.color(QPalette.ColorRole.Highlight)
    fill = QColor(palette.color(QPalette.ColorRole.Base))
    for chip, rect in zip(chips, chip_rects(chips, width, font), strict=True):
        edge = accent if chip.emphasized or chip.is_document else dim
        painter.setPen(edge)
        painter.setBrush(fill)
        painter.drawRoundedRect(QRectF(rect).adjusted(0.5, 0.5, -0.5, -0.5), rect.height() / 2, rect.height() / 2)
        inner = rect.adjusted(CHIP_PAD, 0, -CHIP_PAD, 0)
        if chip.is_document:
            icon = glyph_pixmap("file", accent, ICON)
            painter.drawPixmap(inner.left(), rect.top() + (rect.height() - ICON) // 2, icon)
            inner.setLeft(inner.left() + ICON + 4)
        small = chip_font(font, chip.emphasized)
        painter.setFont(small)
        painter.setPen(text_color if chip.emphasized or chip.is_document else dim)
        label = QFontMetrics(small).elidedText(chip.text, Qt.TextElideMode.ElideMiddle, inner.width())
        painter.drawText(inner, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label)
