"""Paints one message: a header line (who, state, timing) over Markdown rendered text.

Only rows that change are laid out again: documents are cached by (row key, text, width),
so a streaming reply costs one layout per frame, whatever the history's length.
"""

from __future__ import annotations

from collections import OrderedDict

from PySide6.QtCore import QEvent, QPoint, QPointF, QRect, QRectF, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QGuiApplication, QPainter, QPalette, QTextDocument
from PySide6.QtWidgets import QStyle, QStyledItemDelegate, QStyleOptionViewItem

from storage import SourceRecord
from ui.widgets.chat.code_highlight import TOOLBAR_H, CodeBlock, code_blocks_of, code_style_sheet
from ui.widgets.chat.math_images import math_images
from ui.widgets.chat.message_chips import (
    CHIP_GAP,
    MessageChip,
    Thumbnails,
    chip_rects,
    chips_height,
    message_chips,
    no_thumbnails,
    paint_chips,
)
from ui.widgets.chat.message_model import MessageView, ViewRole
from ui.widgets.chat.reply_document import (
    DocumentStyle,
    build_document,
    default_expanded,
    markdown_of,
    reasoning_header,
    reasoning_span,
)
from ui.widgets.chat.tool_chips import ChipBox, ToolChips, paint_tool_chips

PAD = 10
GAP = 6
HEADER_H = 18  # the role's line at the usual 9-10 pt font; see header_height
# The reading column: bubbles at most this wide (about 740 px of text), centred in a wide
# window, as a line of text much longer than ~90 characters is hard to follow.
READING_WIDTH = 760
# A user's message is set in from the column's left, so the two voices read apart; only
# where the column is wide enough to spare it (not in a narrow compare pane).
USER_INDENT = 64
USER_INDENT_FROM = 480
COPY_W = 64  # the Copy button's hit box, at the right of a code block's toolbar
COPIED_MS = 2000  # how long a code block's button says "Copied ✓" before it is Copy again
CACHE_SIZE = 512
HEIGHT_CACHE_SIZE = 200_000
WHO = {"user": "You", "assistant": "Assistant", "system": "System", "tool": "Tool"}
STATE_TEXT = {
    "streaming": "writing…",
    "queued": "queued",
    "prefilling": "reading the prompt…",
    "interrupted": "interrupted",
    "stopped": "stopped",
    "error": "error",
}


def bubble_color(palette: QPalette, role: str, status: str) -> QColor:
    base = palette.color(QPalette.ColorRole.Base)
    dark = base.lightness() < 128
    if status == "error":
        return QColor("#5a2626") if dark else QColor("#fbe3e3")
    if role == "user":
        return QColor("#27415e") if dark else QColor("#e3eefc")
    if role == "system":
        return QColor("#3b3b3b") if dark else QColor("#f1f1f1")
    return palette.color(QPalette.ColorRole.AlternateBase)


def bubble_rect(row: QRect, role: str) -> QRect:
    """Where a message's bubble is drawn in its row of the list: the reading column, centred
    when the row is wider, a user's message set in from the left."""
    rect = row.adjusted(PAD, GAP // 2, -PAD, -GAP // 2)
    if rect.width() > READING_WIDTH:
        rect = QRect(rect.left() + (rect.width() - READING_WIDTH) // 2, rect.top(), READING_WIDTH, rect.height())
    if role == "user" and rect.width() >= USER_INDENT_FROM:
        rect.setLeft(rect.left() + USER_INDENT)
    return rect


def header_height(font: QFont) -> int:
    """The role's line, as tall as its text: a larger system font must not overlap it."""
    return max(HEADER_H, QFontMetrics(font).height() + 2)

class MessageDelegate(QStyledItemDelegate):
    branch_clicked = Signal(int, int)  # message id, step: the ‹ › arrows of a branched message
    code_copied = Signal(str)  # the code of a block whose Copy was clicked (now on the clipboard)
    document_clicked = Signal(str, str)  # sha256, name: a chip of a document attached to a message
    image_clicked = Signal(str, str)  # sha256, name: an image's chip (its thumbnail) on a message
    source_clicked = Signal(object)  # the SourceRecord of a reply's citation chip

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.show_meta = True  # speeds and timings; blind comparisons hide them
        self._docs: OrderedDict[tuple, QTextDocument] = OrderedDict()
        # Row heights outlive the documents: the list view asks every row's size again
        # when one row grows, and that must not rebuild the history's documents.
        self._heights: dict[tuple, int] = {}
        self.layouts = 0  # documents built: a measure of work per frame
        self.link_color = QColor("#0b57d0")  # the palette's Link colour, set when painting
        self.copied: tuple[str, int] | None = None  # (row key, block) whose Copy was clicked last
        self.dim_color = QColor("#6b7280")  # a reply's reasoning: the palette's PlaceholderText
        self.toggled: dict[str, bool] = {}  # row key -> its reasoning opened or closed by a click
        # Sent images' thumbnails by sha256 (ui/services/thumbnails.py sets its own).
        self.thumbnails: Thumbnails = no_thumbnails
        self.tools = ToolChips()  # a reply's tool calls, a chip each under its text
        math_images().ready.connect(self._math_ready)

    def _math_ready(self) -> None:
        """Formulas drawn as their source until matplotlib loaded: lay them out again."""
        self._docs.clear()
        self._heights.clear()
        view = self.parent()
        model = view.model() if view is not None and hasattr(view, "model") else None
        if model is not None and model.rowCount():
            self.sizeHintChanged.emit(model.index(model.rowCount() - 1))
            view.viewport().update()

    def reasoning_expanded(self, view: MessageView) -> bool:
        return self.toggled.get(view.key, default_expanded(view))

    def _content_key(self, view: MessageView, width: int, font: QFont) -> tuple:
        """What a row's document depends on besides the palette (the font too: the system's
        size may change while the app runs)."""
        return (view.key, view.text, width, font.key(), self.reasoning_expanded(view), view.thought_s, view.status,
                view.attachments, view.sources, self.tools.key(view))

    def _document(self, view: MessageView, width: int, font: QFont, color: QColor) -> QTextDocument:
        key = (*self._content_key(view, width, font), color.rgb())
        doc = self._docs.get(key)
        if doc is None:
            self.layouts += 1
            style = DocumentStyle(font, color, self.link_color, self.dim_color)
            doc = build_document(view, markdown_of(view), width, style, self.reasoning_expanded(view),
                                 code_style_sheet(color, self.link_color))
            self._docs[key] = doc
            if len(self._docs) > CACHE_SIZE:
                self._docs.popitem(last=False)
        else:
            self._docs.move_to_end(key)
        return doc

    def _text_width(self, option: QStyleOptionViewItem, view: MessageView) -> int:
        return bubble_rect(option.rect, view.role).width() - 2 * PAD

    def row_document(self, option: QStyleOptionViewItem, view: MessageView) -> QTextDocument:
        """The document a row is painted with (option: the row's, as the view gives it)."""
        return self._document(view, self._text_width(option, view), option.font,
                              option.palette.color(QPalette.ColorRole.Text))

    def document_origin(self, option: QStyleOptionViewItem, view: MessageView) -> QPoint:
        """Where the row's document starts, in the view's coordinates (below the header)."""
        rect = bubble_rect(option.rect, view.role)
        return QPoint(rect.left() + PAD, rect.top() + PAD + header_height(option.font))

    @staticmethod
    def _text_height(doc: QTextDocument, view: MessageView) -> int:
        """The room the text takes: none in a turn that only called tools (its chips say it)."""
        return 0 if view.calls and not view.text.strip() else int(doc.size().height())

    def _below(self, doc: QTextDocument, view: MessageView, width: int, font: QFont) -> tuple[int, int]:
        """Where the row's tool chips and its other chips start, below the document's origin."""
        text = self._text_height(doc, view)
        tools = text + (CHIP_GAP if text else 0)
        return tools, (tools + self.tools.height(view, width, font) if view.calls else text) + CHIP_GAP

    def tools_origin(self, option: QStyleOptionViewItem, view: MessageView) -> QPoint:
        """Where the row's tool chips start, in the view's coordinates."""
        tools, _chips = self._below(self.row_document(option, view), view, self._text_width(option, view), option.font)
        return self.document_origin(option, view) + QPoint(0, tools)

    def tool_boxes(self, option: QStyleOptionViewItem, view: MessageView) -> list[ChipBox]:
        """The row's tool chips laid out, in the coordinates of tools_origin."""
        return self.tools.boxes(view, self._text_width(option, view), option.font) if view.calls else []

    def tool_chip_at(self, option: QStyleOptionViewItem, view: MessageView, pos) -> ChipBox | None:
        """The tool chip whose first line is under pos (the view's coordinates), if any."""
        local = pos - self.tools_origin(option, view)
        return next((box for box in self.tool_boxes(option, view) if box.header.contains(local)), None)

    def sizeHint(self, option: QStyleOptionViewItem, index) -> QSize:
        view: MessageView = index.data(ViewRole)
        width = self._text_width(option, view)
        key = self._content_key(view, width, option.font)
        height = self._heights.get(key)
        if height is None:
            color = option.palette.color(QPalette.ColorRole.Text)
            self.link_color = option.palette.color(QPalette.ColorRole.Link)
            self.dim_color = option.palette.color(QPalette.ColorRole.PlaceholderText)
            _tools, chips = self._below(self._document(view, width, option.font, color), view, width, option.font)
            height = chips - (0 if view.calls else CHIP_GAP) + chips_height(message_chips(view), width, option.font)
            if len(self._heights) > HEIGHT_CACHE_SIZE:
                self._heights.clear()
            self._heights[key] = height
        return QSize(option.rect.width(), height + header_height(option.font) + 2 * PAD + GAP)

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index) -> None:
        view: MessageView = index.data(ViewRole)
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        rect = bubble_rect(option.rect, view.role)
        palette = option.palette
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(bubble_color(palette, view.role, view.status))
        painter.drawRoundedRect(QRectF(rect), 8, 8)
        if option.state & QStyle.StateFlag.State_Selected:
            painter.setPen(palette.color(QPalette.ColorRole.Highlight))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(rect), 8, 8)
        self._paint_header(painter, rect, view, palette, option.font)
        self.link_color = palette.color(QPalette.ColorRole.Link)
        self.dim_color = palette.color(QPalette.ColorRole.PlaceholderText)
        doc = self.row_document(option, view)  # the one hit-testing reads, at the same place
        painter.translate(self.document_origin(option, view))
        self._paint_reasoning_rule(painter, doc)
        doc.drawContents(painter)
        self._paint_code_toolbars(painter, doc, view, palette, option.font)
        tools, below = self._below(doc, view, self._text_width(option, view), option.font)
        if view.calls:
            painter.translate(0, tools)
            focus = self.tools.focused(view) if option.state & QStyle.StateFlag.State_HasFocus else None
            paint_tool_chips(painter, self.tool_boxes(option, view), option.font, palette, focus)
            painter.translate(0, -tools)
        chips = message_chips(view)
        if chips:
            painter.translate(0, below)
            paint_chips(painter, chips, self._text_width(option, view), option.font, palette, self.thumbnails)
        painter.restore()

    def chip_boxes(self, option: QStyleOptionViewItem, view: MessageView) -> list[tuple[MessageChip, QRect]]:
        """The message's document and citation chips, each with its box in the view's coordinates."""
        chips = message_chips(view)
        if not chips:
            return []
        doc = self.row_document(option, view)
        _tools, below = self._below(doc, view, self._text_width(option, view), option.font)
        origin = self.document_origin(option, view) + QPoint(0, below)
        rects = chip_rects(chips, self._text_width(option, view), option.font)
        return [(chip, box.translated(origin)) for chip, box in zip(chips, rects, strict=True)]

    def chip_at(self, option: QStyleOptionViewItem, view: MessageView, pos) -> MessageChip | None:
        return next((chip for chip, box in self.chip_boxes(option, view) if box.contains(pos)), None)

    def _paint_reasoning_rule(self, painter: QPainter, doc: QTextDocument) -> None:
        span = reasoning_span(doc)
        if span is not None:
            painter.fillRect(QRectF(span.left() + 4, span.top() + 2, 2, span.height() - 4), self.dim_color)

    # ----- code blocks: language and Copy above each ------------------------------------

    def code_toolbars(self, doc: QTextDocument) -> list[tuple[CodeBlock, QRectF, QRectF]]:
        """Each code block with its toolbar's rectangle and its Copy button's, in document
        coordinates (the room highlight_code_blocks left above the block)."""
        out = []
        layout = doc.documentLayout()
        for block in code_blocks_of(doc):
            top = layout.blockBoundingRect(doc.findBlockByNumber(block.first_block))
            bar = QRectF(top.left(), top.top() - TOOLBAR_H, top.width(), TOOLBAR_H - 2)
            copy = QRectF(bar.right() - COPY_W, bar.top(), COPY_W, bar.height())
            out.append((block, bar, copy))
        return out

    def _paint_code_toolbars(self, painter: QPainter, doc: QTextDocument, view: MessageView,
                             palette: QPalette, font: QFont) -> None:
        small = QFont(font)
        small.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
        painter.setFont(small)
        for block, bar, copy in self.code_toolbars(doc):
            painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
            painter.drawText(bar.adjusted(4, 0, 0, 0), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                             block.language or "code")
            painter.setPen(palette.color(QPalette.ColorRole.Link))
            label = "Copied ✓" if self.copied == (view.key, block.first_block) else "Copy"
            painter.drawText(copy, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, label)

    def _show_copied(self, which: tuple[str, int], view) -> None:
        """'Copied ✓' in place of that block's Copy, for COPIED_MS (it said so forever)."""
        self.copied = which
        repaint = view.viewport().update if view is not None else (lambda: None)
        repaint()

        def back() -> None:
            if self.copied == which:  # not a later click's
                self.copied = None
                repaint()

        QTimer.singleShot(COPIED_MS, self, back)

    def code_block_at(self, option: QStyleOptionViewItem, view: MessageView, pos) -> CodeBlock | None:
        """The code block whose Copy is under pos (in the view's coordinates), if any."""
        doc = self.row_document(option, view)
        local = QPointF(pos) - QPointF(self.document_origin(option, view))
        return next((block for block, _bar, copy in self.code_toolbars(doc) if copy.contains(local)), None)

    def reasoning_header_at(self, option: QStyleOptionViewItem, view: MessageView, pos) -> bool:
        """Whether pos (in the view's coordinates) is on a reply's "Thought for N s" line."""
        header = reasoning_header(self.row_document(option, view))
        local = QPointF(pos) - QPointF(self.document_origin(option, view))
        return header is not None and header.contains(local)

    def toggle_reasoning(self, view: MessageView, index) -> None:
        self.toggled[view.key] = not self.reasoning_expanded(view)
        self.sizeHintChanged.emit(index)

    def _header_parts(self, rect, view: MessageView, font: QFont):
        """The header's rectangle, small font, details text, and the arrows' hit boxes."""
        header = rect.adjusted(PAD, PAD - 2, -PAD, 0)
        header.setHeight(header_height(font))
        small = QFont(font)
        small.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
        branch = f"‹ {view.branch[0]}/{view.branch[1]} ›" if view.branch else ""
        meta = view.meta if self.show_meta else ""
        details = "   ".join(d for d in (branch, STATE_TEXT.get(view.status, ""), meta) if d)
        # In a narrow column (a compare pane) the details give way to the role's name.
        bold = QFont(font)
        bold.setBold(True)
        room = header.width() - QFontMetrics(bold).horizontalAdvance(WHO.get(view.role, view.role)) - 12
        details = QFontMetrics(small).elidedText(details, Qt.TextElideMode.ElideRight, max(0, room))
        arrows = None
        if branch:
            fm = QFontMetrics(small)
            left = header.right() - fm.horizontalAdvance(details)
            width = fm.horizontalAdvance(branch)
            arrow = fm.horizontalAdvance("‹ ") + 4
            arrows = (QRect(left - 4, header.top(), arrow, header_height(font)),
                      QRect(left + width - arrow + 4, header.top(), arrow, header_height(font)))
        return header, small, details, arrows

    def _paint_header(self, painter, rect, view: MessageView, palette: QPalette, font: QFont) -> None:
        header, small, details, _arrows = self._header_parts(rect, view, font)
        bold = QFont(font)
        bold.setBold(True)
        painter.setFont(bold)
        painter.setPen(palette.color(QPalette.ColorRole.Text))
        who = WHO.get(view.role, view.role)
        painter.drawText(header, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, who)
        painter.setFont(small)
        painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
        painter.drawText(header, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, details)

    def arrow_at(self, option_rect, view: MessageView, font: QFont, pos) -> int:
        """-1 or +1 when pos is on the ‹ or › of a branched message's header, else 0."""
        rect = bubble_rect(option_rect, view.role)
        _h, _f, _d, arrows = self._header_parts(rect, view, font)
        if not arrows or view.message_id is None:
            return 0
        if arrows[0].contains(pos) and view.branch[0] > 1:
            return -1
        if arrows[1].contains(pos) and view.branch[0] < view.branch[1]:
            return 1
        return 0

    def editorEvent(self, event, model, option, index) -> bool:
        if event.type() == QEvent.Type.MouseButtonRelease:
            view: MessageView = index.data(ViewRole)
            step = self.arrow_at(option.rect, view, option.font, event.position().toPoint())
            if step:
                self.branch_clicked.emit(view.message_id, step)
                return True
            block = self.code_block_at(option, view, event.position().toPoint())
            if block is not None:
                QGuiApplication.clipboard().setText(block.code)
                self._show_copied((view.key, block.first_block), option.widget)
                self.code_copied.emit(block.code)
                return True
            if self.reasoning_header_at(option, view, event.position().toPoint()):
                self.toggle_reasoning(view, index)
                return True
            box = self.tool_chip_at(option, view, event.position().toPoint())
            if box is not None:
                self.tools.focus[view.key] = view.calls.index(box.call)
                self.tools.toggle(box.call)
                self.sizeHintChanged.emit(index)
                return True
            chip = self.chip_at(option, view, event.position().toPoint())
            if chip is not None:
                if isinstance(chip.target, SourceRecord):
                    self.source_clicked.emit(chip.target)
                elif chip.is_image:
                    self.image_clicked.emit(chip.target.sha256, chip.target.name)
                else:
                    self.document_clicked.emit(chip.target.sha256, chip.target.name)
                return True
        return super().editorEvent(event, model, option, index)
