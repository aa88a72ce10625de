"""A reply's tool calls as chips in its bubble, under its text: one line each, collapsed,
"▸ add · done · 0.25 s" (the tool's name, how the call stands, how long it ran); a click,
or Enter or Space on the row, opens it to show the call's arguments and its result, as
plain text ("Error" above a failed call's, in red; never coloured as code). A call that
waits for the user is open, with room at its bottom for the approval's buttons (real
widgets, ui/widgets/tools/tool_approval.py, laid over the chip by the message list).

Laid out, painted and hit-tested here for the delegate, in the coordinates of the chip
area's top-left corner. Layouts are cached by what they depend on; a running call's time
is read when painting, so its ticking costs no layout."""

from __future__ import annotations

import json
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from PySide6.QtCore import QPointF, QRect, QRectF, Qt
from PySide6.QtGui import (
    QAbstractTextDocumentLayout,
    QColor,
    QFont,
    QFontDatabase,
    QFontMetrics,
    QPainter,
    QPalette,
    QPen,
    QPixmap,
    QTextDocument,
)

from ui.widgets.chat.code_highlight import ERROR_COLORS
from ui.widgets.chat.message_model import APPROVAL, DONE, FAILED, RUNNING, MessageView, ToolCallView
from ui.widgets.common.glyphs import glyph_pixmap

CHIP_GAP = 6  # between chips, and between the text above and the first chip
PAD = 8
ICON = 14
SHOWN_CHARS = 20_000  # of a result, on its open chip (the model read it whole)
CACHE_SIZE = 256
GREEN = {False: "#1e7e34", True: "#81c995"}
AMBER = {False: "#9a5b00", True: "#fdd663"}

ApprovalHeight = Callable[[int], int]  # the approval's height at a width (its buttons wrap)


@dataclass
class ChipBox:
    """One chip laid out: its box, its first line (a click opens or closes it), its open
    part's labelled texts (label, its box, the text's document, where it is drawn), and the
    room left for the approval's buttons."""

    call: ToolCallView
    rect: QRect
    header: QRect
    opened: bool
    parts: list[tuple[str, QRect, QTextDocument, QPointF]] = field(default_factory=list)
    approval: QRect | None = None


@lru_cache(maxsize=8)
def _tool_icon(rgba: int) -> QPixmap:
    """The wrench, drawn once a colour (each chip's paint would render the SVG again)."""
    return glyph_pixmap("tool", QColor.fromRgba(rgba), ICON)


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


def state_color(state: str, palette: QPalette) -> QColor:
    dark = is_dark(palette)
    if state == DONE:
        return QColor(GREEN[dark])
    if state == FAILED:
        return QColor(ERROR_COLORS[dark])
    if state == APPROVAL:
        return QColor(AMBER[dark])
    if state == RUNNING:
        return palette.color(QPalette.ColorRole.Link)
    return palette.color(QPalette.ColorRole.PlaceholderText)


def elapsed(call: ToolCallView, now: float | None = None) -> str:
    """How long the call ran (stored), or has run so far (running)."""
    if call.state == RUNNING and call.since is not None:
        return f"{max(0.0, (now if now is not None else time.monotonic()) - call.since):.0f} s"
    return call.took


def header_parts(call: ToolCallView, opened: bool, now: float | None = None) -> tuple[str, str, str]:
    """The first line in three pieces: "▸ add", "done", "0.25 s · 4,900 characters cut"."""
    rest = " · ".join(p for p in (elapsed(call, now), call.note) if p)
    return f"{'▾' if opened else '▸'} {call.name}", call.state, rest


def header_text(call: ToolCallView, opened: bool, now: float | None = None) -> str:
    return " · ".join(p for p in header_parts(call, opened, now) if p)


def shown_text(box: ChipBox) -> str:
    """What the chip shows, as text (for tests and a screen reader)."""
    lines = [header_text(box.call, box.opened)]
    for label, _rect, doc, _at in box.parts:
        lines += [label, doc.toPlainText()]
    return "\n".join(lines)


def pretty_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _bold(font: QFont) -> QFont:
    bold = QFont(font)
    bold.setBold(True)
    return bold


def _small(font: QFont) -> QFont:
    small = QFont(font)
    small.setPointSizeF(max(6.0, font.pointSizeF() * 0.85))
    return small


def _plain(text: str, font: QFont, width: int) -> QTextDocument:
    doc = QTextDocument()
    doc.setDefaultFont(font)
    doc.setDocumentMargin(0)
    doc.setPlainText(text)
    doc.setTextWidth(max(20, width))
    return doc


class ToolChips:
    """The delegate's part for tool chips: which are open (a click's), which one has the
    keyboard's focus in its row, and the cached layouts."""

    def __init__(self) -> None:
        self.opened: dict[str, bool] = {}  # call id -> opened by the user
        self.focus: dict[str, int] = {}  # row key -> the chip Enter opens (Left and Right move it)
        self.approval_height: ApprovalHeight = lambda _width: 0
        self._layouts: OrderedDict[tuple, list[ChipBox]] = OrderedDict()

    def is_open(self, call: ToolCallView) -> bool:
        return call.state == APPROVAL or self.opened.get(call.call_id, False)

    def toggle(self, call: ToolCallView) -> None:
        if call.state != APPROVAL:  # a call waiting for the user stays open, its buttons in sight
            self.opened[call.call_id] = not self.is_open(call)

    def focused(self, view: MessageView) -> int:
        return min(self.focus.get(view.key, 0), max(0, len(view.calls) - 1))

    def move_focus(self, view: MessageView, step: int) -> bool:
        """Left (-1) or Right (+1) among a row's chips; False at either end."""
        to = self.focused(view) + step
        if not 0 <= to < len(view.calls):
            return False
        self.focus[view.key] = to
        return True

    def key(self, view: MessageView) -> tuple:
        """What a row's chips look like besides their width and font."""
        return view.calls, tuple(self.is_open(c) for c in view.calls)

    def boxes(self, view: MessageView, width: int, font: QFont) -> list[ChipBox]:
        key = (*self.key(view), width, font.key())
        boxes = self._layouts.get(key)
        if boxes is None:
            boxes = self._lay_out(view.calls, width, font)
            self._layouts[key] = boxes
            if len(self._layouts) > CACHE_SIZE:
                self._layouts.popitem(last=False)
        else:
            self._layouts.move_to_end(key)
        return boxes

    def height(self, view: MessageView, width: int, font: QFont) -> int:
        boxes = self.boxes(view, width, font) if view.calls else []
        return boxes[-1].rect.bottom() + 1 if boxes else 0

    def clear(self) -> None:
        self._layouts.clear()

    def _lay_out(self, calls: tuple[ToolCallView, ...], width: int, font: QFont) -> list[ChipBox]:
        out, y = [], 0
        line = QFontMetrics(font).height() + 8
        for call in calls:
            opened = self.is_open(call)
            header_w = self._header_width(call, font) if not opened else width
            header = QRect(0, y, min(width, header_w), line)
            box = ChipBox(call, QRect(header), header, opened)
            if opened:
                self._lay_out_open(box, width, font)
            out.append(box)
            y = box.rect.bottom() + 1 + CHIP_GAP
        return out

    @staticmethod
    def _header_width(call: ToolCallView, font: QFont) -> int:
        """As wide as _paint_header draws its line (a running call's time may grow)."""
        name, state, rest = header_parts(call, False, time.monotonic())
        if call.state == RUNNING:
            rest = "0000 s"
        fm, bold = QFontMetrics(_small(font)), QFontMetrics(_bold(font))
        text = bold.horizontalAdvance(name) + 8 + fm.horizontalAdvance(f"● {state}")
        if rest:
            text += 8 + fm.horizontalAdvance(rest)
        return text + ICON + 6 + 2 * PAD + 4  # a few pixels spare: text measured to the pixel was elided

    def _lay_out_open(self, box: ChipBox, width: int, font: QFont) -> None:
        inner = width - 2 * PAD
        y = box.header.bottom() + 1
        small_h = QFontMetrics(_small(font)).height()
        mono = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        mono.setPointSizeF(font.pointSizeF() * 0.9)
        call = box.call
        texts = [("Arguments", _plain(pretty_json(call.arguments) or "{}", mono, inner))]
        if call.result is not None:
            result = call.result if len(call.result) <= SHOWN_CHARS else \
                call.result[:SHOWN_CHARS] + f"\n… ({len(call.result) - SHOWN_CHARS:,} more characters)"
            texts.append(("Error" if call.state == FAILED else "Result", _plain(result or "(empty)", font, inner)))
        for label, doc in texts:
            label_rect = QRect(PAD, y, inner, small_h)
            at = QPointF(PAD, y + small_h + 2)
            box.parts.append((label, label_rect, doc, at))
            y = int(at.y() + doc.size().height()) + 6
        if call.state == APPROVAL:
            box.approval = QRect(PAD, y, inner, self.approval_height(inner))
            y = box.approval.bottom() + 1 + 4
        box.rect = QRect(0, box.header.top(), width, y + PAD // 2 - box.header.top())


def paint_tool_chips(painter: QPainter, boxes: list[ChipBox], font: QFont, palette: QPalette,
                     focused: int | None = None) -> None:
    """The chips at the painter's origin; focused: the chip with the keyboard's focus ring."""
    now = time.monotonic()
    text = palette.color(QPalette.ColorRole.Text)
    dim = palette.color(QPalette.ColorRole.PlaceholderText)
    for i, box in enumerate(boxes):
        call = box.call
        accent = state_color(call.state, palette)
        painter.setPen(QPen(accent if call.state == APPROVAL else dim, 1))
        painter.setBrush(palette.color(QPalette.ColorRole.Base))
        radius = box.rect.height() / 2 if not box.opened else 8
        painter.drawRoundedRect(QRectF(box.rect).adjusted(0.5, 0.5, -0.5, -0.5), radius, radius)
        if i == focused:
            painter.setPen(QPen(palette.color(QPalette.ColorRole.Highlight), 2))
            painter.setBrush(Qt.BrushStyle.NoBrush)
            painter.drawRoundedRect(QRectF(box.rect).adjusted(-1.5, -1.5, 1.5, 1.5), radius + 1, radius + 1)
        _paint_header(painter, box, font, text, dim, accent, now)
        for label, rect, doc, at in box.parts:
            error = label == "Error"
            painter.setFont(_bold(_small(font)) if error else _small(font))
            painter.setPen(accent if error else dim)
            painter.drawText(rect, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, label)
            painter.save()
            painter.translate(at)
            context = QAbstractTextDocumentLayout.PaintContext()
            context.palette = QPalette(palette)
            context.palette.setColor(QPalette.ColorRole.Text, text)
            doc.documentLayout().draw(painter, context)
            painter.restore()


def _paint_header(painter: QPainter, box: ChipBox, font: QFont, text: QColor, dim: QColor, accent: QColor,
                  now: float) -> None:
    name, state, rest = header_parts(box.call, box.opened, now)
    area = box.header.adjusted(PAD, 0, -PAD, 0)
    middle = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter
    painter.drawPixmap(area.left(), area.top() + (area.height() - ICON) // 2, _tool_icon(dim.rgba()))
    area.setLeft(area.left() + ICON + 6)
    bold, small = _bold(font), _small(font)
    painter.setFont(bold)
    painter.setPen(text)
    name = QFontMetrics(bold).elidedText(name, Qt.TextElideMode.ElideRight, area.width() // 2)
    painter.drawText(area, middle, name)
    area.setLeft(area.left() + QFontMetrics(bold).horizontalAdvance(name) + 8)
    painter.setFont(small)
    painter.setPen(accent)
    fm = QFontMetrics(small)
    said = fm.elidedText(f"● {state}", Qt.TextElideMode.ElideRight, area.width())
    painter.drawText(area, middle, said)
    area.setLeft(area.left() + fm.horizontalAdvance(said) + 8)
    painter.setPen(dim)
    painter.drawText(area, middle, fm.elidedText(rest, Qt.TextElideMode.ElideRight, max(0, area.width())))
