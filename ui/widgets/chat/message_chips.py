"""The chips under a message's text: a user message's attached documents (name, pages,
characters), its images (a thumbnail beside the name: clicked, it opens large) and a
reply's sources ("[1] report.pdf p.3", the ones it cites in bold with an accent edge). Laid
out, painted and hit-tested here for the delegate, in the coordinates of the chip area's
top-left corner. A thumbnail is drawn once it was loaded (ui/services/thumbnails.py); the
chip keeps its size meanwhile, so a row's height never changes when it comes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QRect, QRectF, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter, QPalette

from storage import AttachmentRecord, SourceRecord
from ui.widgets.chat.document_labels import document_details, image_details, source_label
from ui.widgets.chat.message_model import MessageView
from ui.widgets.common.glyphs import glyph_pixmap

CHIP_GAP = 6  # between chips, and between the text and the first row of chips
CHIP_PAD = 8
ICON = 14
MAX_CHIP_W = 360
THUMB = 56  # an image chip's thumbnail square

# A sent image's thumbnail by its sha256, None until it was loaded.
Thumbnails = Callable[[str], "QImage | None"]


def no_thumbnails(_sha256: str) -> QImage | None:
    return None


@dataclass(frozen=True, slots=True)
class MessageChip:
    text: str
    target: AttachmentRecord | SourceRecord
    emphasized: bool = False

    @property
    def is_document(self) -> bool:
        return isinstance(self.target, AttachmentRecord)

    @property
    def is_image(self) -> bool:
        return isinstance(self.target, AttachmentRecord) and self.target.is_image


def message_chips(view: MessageView) -> list[MessageChip]:
    documents = [MessageChip(f"{a.name} · {_details(a)}", a) for a in view.attachments]
    sources = [MessageChip(source_label(s), s, emphasized=s.cited) for s in view.sources]
    return documents + sources


def _details(a: AttachmentRecord) -> str:
    return image_details(a.mime, a.size_bytes) if a.is_image else document_details(a.pages, a.size_bytes, a.chars)


def chip_font(font: QFont, emphasized: bool = False) -> QFont:
    small = QFont(font)
    small.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
    small.setBold(emphasized)
    return small


def chip_rects(chips: list[MessageChip], width: int, font: QFont) -> list[QRect]:
    """Each chip's box, left to right, wrapping at width (a row as tall as its tallest chip)."""
    rects, x, y, line = [], 0, 0, 0
    for chip in chips:
        fm = QFontMetrics(chip_font(font, chip.emphasized))
        icon = THUMB + 6 if chip.is_image else ICON + 4 if chip.is_document else 0
        # A few pixels spare: text measured to the pixel was elided where painted.
        w = min(MAX_CHIP_W, width, fm.horizontalAdvance(chip.text) + icon + 2 * CHIP_PAD + 4)
        h = THUMB + 8 if chip.is_image else fm.height() + 8
        if x and x + w > width:
            x, y, line = 0, y + line + CHIP_GAP, 0
        rects.append(QRect(x, y, w, h))
        x += w + CHIP_GAP
        line = max(line, h)
    return rects


def chips_height(chips: list[MessageChip], width: int, font: QFont) -> int:
    """The room under the text (0 without chips)."""
    rects = chip_rects(chips, width, font)
    return max(r.bottom() + 1 for r in rects) + CHIP_GAP if rects else 0


def paint_chips(painter: QPainter, chips: list[MessageChip], width: int, font: QFont, palette: QPalette,
                thumbnails: Thumbnails = no_thumbnails) -> None:
    text_color = palette.color(QPalette.ColorRole.Text)
    dim = palette.color(QPalette.ColorRole.PlaceholderText)
    accent = palette.color(QPalette.ColorRole.Highlight)
    fill = QColor(palette.color(QPalette.ColorRole.Base))
    for chip, rect in zip(chips, chip_rects(chips, width, font), strict=True):
        edge = accent if chip.emphasized or chip.is_document else dim
        painter.setPen(edge)
        painter.setBrush(fill)
        radius = 8 if chip.is_image else rect.height() / 2
        painter.drawRoundedRect(QRectF(rect).adjusted(0.5, 0.5, -0.5, -0.5), radius, radius)
        inner = rect.adjusted(CHIP_PAD, 0, -CHIP_PAD, 0)
        if chip.is_image:
            box = QRect(rect.left() + 4, rect.top() + 4, THUMB, THUMB)
            _paint_thumbnail(painter, box, thumbnails(chip.target.sha256), dim)
            inner.setLeft(box.right() + 1 + 6)
        elif chip.is_document:
            icon = glyph_pixmap("file", accent, ICON)
            painter.drawPixmap(inner.left(), rect.top() + (rect.height() - ICON) // 2, icon)
            inner.setLeft(inner.left() + ICON + 4)
        small = chip_font(font, chip.emphasized)
        painter.setFont(small)
        painter.setPen(text_color if chip.emphasized or chip.is_document else dim)
        label = QFontMetrics(small).elidedText(chip.text, Qt.TextElideMode.ElideMiddle, inner.width())
        painter.drawText(inner, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label)


def _paint_thumbnail(painter: QPainter, box: QRect, image: QImage | None, dim: QColor) -> None:
    """The image scaled into box, centred; an outline of the box until it was loaded."""
    if image is None or image.isNull():
        painter.setPen(dim)
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawRoundedRect(QRectF(box).adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
        painter.drawPixmap(box.center().x() - ICON // 2, box.center().y() - ICON // 2, glyph_pixmap("file", dim, ICON))
        return
    size = image.size().scaled(box.size(), Qt.AspectRatioMode.KeepAspectRatio)
    target = QRect(box.left() + (box.width() - size.width()) // 2, box.top() + (box.height() - size.height()) // 2,
                   size.width(), size.height())
    painter.drawImage(target, image)
