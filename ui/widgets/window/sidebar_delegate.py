"""How a sidebar row is drawn: a date header, or a chat's title with what it is doing on the
right ('writing · 23 tok/s', 'finished, unread') and, for a search hit, the matching text
underneath with the matched words in bold and the link colour."""

from __future__ import annotations

import html
import re

from PySide6.QtCore import QModelIndex, QPersistentModelIndex, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from ui.widgets.common.words import elided_at_a_word
from ui.widgets.window.tab_activity import READY, TabState, row_text

Index = QModelIndex | QPersistentModelIndex
HEADER_ROLE = Qt.ItemDataRole.UserRole + 10
SNIPPET_ROLE = Qt.ItemDataRole.UserRole + 11
ACTIVITY_ROLE = Qt.ItemDataRole.UserRole + 12
PAD_X, PAD_Y = 6, 4
SNIPPET_LINES = 2


def snippet_html(runs: tuple[tuple[str, bool], ...], text: QColor, match: QColor) -> str:
    """Rich text of a snippet's (text, matched) runs: matches bold, in the match colour."""
    parts = []
    for part, matched in runs:
        safe = html.escape(re.sub(r"\s+", " ", part))  # one line: newlines as spaces, spaces kept
        parts.append(f'<b style="color:{match.name()}">{safe}</b>' if matched else safe)
    return f'<span style="color:{text.name()}">{"".join(parts)}</span>'


def _small(font: QFont) -> QFont:
    small = QFont(font)
    small.setPointSizeF(max(6.0, font.pointSizeF() * 0.9))
    return small


class SidebarDelegate(QStyledItemDelegate):
    def sizeHint(self, option: QStyleOptionViewItem, index: Index) -> QSize:  # noqa: N802
        fm = option.fontMetrics
        if index.data(HEADER_ROLE):
            return QSize(option.rect.width(), fm.height() + 2 * PAD_Y + 4)
        height = fm.height() + 2 * PAD_Y
        if index.data(SNIPPET_ROLE):
            height += SNIPPET_LINES * QFontMetrics(_small(option.font)).lineSpacing() + 2
        return QSize(option.rect.width(), height)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: Index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        painter.save()
        try:
            if index.data(HEADER_ROLE):
                self._paint_header(painter, opt)
            else:
                self._paint_row(painter, opt, index)
        finally:
            painter.restore()

    def _paint_header(self, painter: QPainter, opt: QStyleOptionViewItem) -> None:
        font = _small(opt.font)
        font.setBold(True)
        painter.setFont(font)
        painter.setPen(opt.palette.color(QPalette.ColorGroup.Active, QPalette.ColorRole.PlaceholderText))
        rect = opt.rect.adjusted(PAD_X, PAD_Y, -PAD_X, 0)
        painter.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignBottom, opt.text)

    def _paint_row(self, painter: QPainter, opt: QStyleOptionViewItem, index) -> None:
        title, opt.text = opt.text, ""
        widget = opt.widget
        style = widget.style() if widget is not None else None
        if style is not None:  # the selection and hover panel, as any list draws it
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, widget)
        selected = bool(opt.state & QStyle.StateFlag.State_Selected)
        text = opt.palette.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        accent = text if selected else opt.palette.color(QPalette.ColorRole.Link)
        muted = text if selected else opt.palette.color(QPalette.ColorRole.PlaceholderText)
        rect = opt.rect.adjusted(PAD_X, PAD_Y, -PAD_X, -PAD_Y)
        fm = opt.fontMetrics
        line = QRect(rect.left(), rect.top(), rect.width(), fm.height())
        activity = index.data(ACTIVITY_ROLE) or READY
        if activity.state is not TabState.READY:
            state = row_text(activity)
            small = _small(opt.font)
            painter.setFont(small)
            painter.setPen(accent)
            room = min(QFontMetrics(small).horizontalAdvance(state) + 4, rect.width() // 2)  # + rounding
            painter.drawText(line, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                             elided_at_a_word(QFontMetrics(small), state, room))
            line.setWidth(rect.width() - room - PAD_X)
        painter.setFont(opt.font)
        painter.setPen(text)
        painter.drawText(line, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                         elided_at_a_word(fm, title, line.width()))
        runs = index.data(SNIPPET_ROLE)
        if runs:
            self._paint_snippet(painter, opt, runs, rect.adjusted(0, fm.height() + 2, 0, 0), muted, accent)

    def _paint_snippet(self, painter: QPainter, opt, runs, rect: QRect, text: QColor, accent: QColor) -> None:
        doc = QTextDocument()
        doc.setDocumentMargin(0)
        doc.setDefaultFont(_small(opt.font))
        doc.setHtml(snippet_html(runs, text, accent))
        doc.setTextWidth(rect.width())
        painter.translate(rect.topLeft())
        doc.drawContents(painter, QRectF(0, 0, rect.width(), rect.height()))  # clipped to the lines it has
