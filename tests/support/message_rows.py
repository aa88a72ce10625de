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
