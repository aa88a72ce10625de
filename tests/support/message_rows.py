"""A message row of a MessageList as its delegate lays it out: the option the view gives the
row, the document it is painted with, and a point of that document in the view's coordinates
(for real clicks on a reply's parts)."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF
from PySide6.QtGui import QTextDocument
from PySide6.QtWidgets import QListView, QStyleOptionViewItem


def row_option(view: QListView, row: int) -> QStyleOptionViewItem:
    option = QStyleOptionViewItem()
    view.initViewItemOption(option)
    option.rect = view.visualRect(view.model().index(row, 0))
    option.widget = view
    return option


def row_document(view: QListView, row: int) -> QTextDocument:
    return view.delegate.row_document(row_option(view, row), view.model().view(row))


def view_point(view: QListView, row: int, in_document: QPointF) -> QPoint:
    """in_document (a point of the row's document) in the view's coordinates."""
    origin = view.delegate.document_origin(row_option(view, row), view.model().view(row))
    return QPoint(int(origin.x() + in_document.x()), int(origin.y() + in_document.y()))


def calls_shown(view: QListView) -> list:
    """Every tool call's chip in the list (ToolCallView), in order."""
    return [call for v in view.model().views() for call in v.calls]


def call_row(view: QListView, name: str, nth: int = 0) -> tuple[int, int]:
    """The row holding the nth call of tool name, and the call's place in that row."""
    found = [(row, i) for row, v in enumerate(view.model().views()) for i, c in enumerate(v.calls) if c.name == name]
    return found[nth]


def chip_box(view: QListView, row: int, i: int):
    """The row's i-th tool chip as the delegate lays it out (tool_chips.ChipBox)."""
    return view.delegate.tool_boxes(row_option(view, row), view.model().view(row))[i]


def chip_rect(view: QListView, row: int, i: int, part: str = "rect"):
    """The chip's box (or its first line, part="header") in the view's coordinates."""
    origin = view.delegate.tools_origin(row_option(view, row), view.model().view(row))
    return getattr(chip_box(view, row, i), part).translated(origin)


def chip_shown(view: QListView, row: int, i: int) -> str:
    from ui.widgets.chat.tool_chips import shown_text

    return shown_text(chip_box(view, row, i))
