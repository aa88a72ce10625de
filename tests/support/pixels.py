"""What a grabbed widget shows, for screenshot tests that check more than that a file exists."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QRect
from PySide6.QtGui import QColor, QImage
from PySide6.QtWidgets import QListView, QWidget

from ui.widgets.chat.message_delegate import GAP, PAD


def pixel(image: QImage, top: QWidget, widget: QWidget, point: QPoint) -> QColor:
    """The colour at `point` of `widget` in `image`, grabbed from `top` (widget or an ancestor)."""
    at = widget.mapTo(top, point) if widget is not top else point
    ratio = image.devicePixelRatio()
    return image.pixelColor(round(at.x() * ratio), round(at.y() * ratio))


def bubble_colour(image: QImage, top: QWidget, view: QListView, row: int) -> str:
    """The background of a message's bubble as painted: the middle of its bottom padding,
    where no text is (see MessageDelegate.paint). The row must be on screen."""
    rect = view.visualRect(view.model().index(row, 0))
    point = QPoint(rect.center().x(), rect.bottom() - GAP // 2 - PAD // 2)
    assert view.viewport().rect().contains(point), f"row {row} is not on screen: {rect}"
    return pixel(image, top, view.viewport(), point).name()


def count_near(image: QImage, top: QWidget, widget: QWidget, rect: QRect, colour: str, tolerance: int = 40) -> int:
    """How many pixels of `rect` (in `widget`'s coordinates) are within `tolerance` of `colour`
    in each channel: glyphs drawn in that colour (anti-aliased edges blend, their cores not)."""
    want = QColor(colour)
    found = 0
    for y in range(rect.top(), rect.bottom() + 1, 1):
        for x in range(rect.left(), rect.right() + 1, 1):
            c = pixel(image, top, widget, QPoint(x, y))
            if max(abs(c.red() - want.red()), abs(c.green() - want.green()), abs(c.blue() - want.blue())) <= tolerance:
                found += 1
    return found
