"""The scrolling list of one conversation's messages, used by chat tabs and compare panes."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractItemView, QListView

from ui.widgets.message_delegate import MessageDelegate
from ui.widgets.message_model import MessageListModel


class MessageList(QListView):
    def __init__(self, model: MessageListModel, parent=None) -> None:
        super().__init__(parent)
        self.setModel(model)
        self.delegate = MessageDelegate(self)
        self.setItemDelegate(self.delegate)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setUniformItemSizes(False)
        self.setWordWrap(True)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        # Lay long histories out in slices between events, so opening one never freezes.
        self.setLayoutMode(QListView.LayoutMode.Batched)
        self.setBatchSize(50)
        model.rowsInserted.connect(lambda *_: self.scrollToBottom())
        model.dataChanged.connect(self._follow_stream)

    def _follow_stream(self, first, _last, _roles=()) -> None:
        # Keep the newest text in sight while it streams, unless the user scrolled up.
        bar = self.verticalScrollBar()
        if first.row() == self.model().rowCount() - 1 and bar.value() >= bar.maximum() - 80:
            self.scrollToBottom()
