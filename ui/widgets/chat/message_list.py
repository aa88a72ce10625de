"""The scrolling list of one conversation's messages, used by chat tabs and compare panes.

It follows the newest text (new rows, a reply growing, the list redrawn after Save prompt or
reopened mid-reply, a narrower column when Details open) unless the user scrolled up; then
it stays put and offers a "Jump to latest" button. A chat opened at a search hit shows that
message instead, until the user scrolls."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QPersistentModelIndex, QPoint, QRect, Qt
from PySide6.QtGui import QHelpEvent, QKeyEvent, QMouseEvent, QResizeEvent
from PySide6.QtWidgets import QAbstractItemView, QListView, QStyleOptionViewItem, QToolButton, QToolTip

from ui.widgets.chat.message_chips import MessageChip
from ui.widgets.chat.message_delegate import MessageDelegate
from ui.widgets.chat.message_model import MessageListModel, MessageView

AT_END_PX = 24  # this close to the end counts as at the end: reading the last lines still follows
JUMP_MARGIN = 12


class MessageList(QListView):
    def __init__(self, model: MessageListModel, parent=None) -> None:
        super().__init__(parent)
        self.messages = model  # typed, unlike model()
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
        # Whether the view keeps the end in sight: changed by the user's scrolling only, so
        # that a reset or a relayout (which move the bar themselves) cannot turn it off.
        self.following = True
        # A row kept at the top while the rows around it lay out (a search hit), until the
        # user scrolls: the batched layout moves the bar after the first scrollTo.
        self._anchor = QPersistentModelIndex()
        self.jump_button = QToolButton(self)
        self.jump_button.setText("↓ Jump to latest")
        self.jump_button.setToolTip("Show the newest message and follow it again")
        self.jump_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.jump_button.clicked.connect(self.jump_to_latest)
        self.jump_button.hide()
        bar = self.verticalScrollBar()
        bar.rangeChanged.connect(self._range_changed)
        bar.actionTriggered.connect(self._user_scrolled)  # the wheel, the bar's arrows and drags

    def show_first(self, matches: Callable[[MessageView], bool]) -> None:
        """Scroll to the first row that matches and select it (its bubble is outlined); the
        newest text is not followed meanwhile. No row matches: nothing changes."""
        model = self.messages
        for row in range(model.rowCount()):
            if matches(model.view(row)):
                index = model.index(row, 0)
                self.following = False
                self._anchor = QPersistentModelIndex(index)
                self.setCurrentIndex(index)
                self.scrollTo(index, QAbstractItemView.ScrollHint.PositionAtTop)
                self._show_jump()
                return

    def chip_boxes(self, row: int) -> list[tuple[MessageChip, QRect]]:
        """A row's document and citation chips with their boxes in the viewport's coordinates."""
        index = self.messages.index(row, 0)
        option = QStyleOptionViewItem()
        self.initViewItemOption(option)
        option.rect = self.visualRect(index)
        return self.delegate.chip_boxes(option, self.messages.view(row))

    def chip_under(self, pos: QPoint) -> MessageChip | None:
        """The chip at pos (viewport coordinates), if any."""
        index = self.indexAt(pos)
        if not index.isValid():
            return None
        return next((chip for chip, box in self.chip_boxes(index.row()) if box.contains(pos)), None)

    def viewportEvent(self, event: QEvent) -> bool:
        """Over a chip the pointer is a hand and the tooltip says what a click opens."""
        if event.type() == QEvent.Type.MouseMove and isinstance(event, QMouseEvent):
            chip = self.chip_under(event.position().toPoint())
            if chip is not None:
                self.viewport().setCursor(Qt.CursorShape.PointingHandCursor)
            else:
                self.viewport().unsetCursor()
        elif event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            chip = self.chip_under(event.pos())
            if chip is not None:
                tip = ("Show the image" if chip.is_image else "Show the document's text" if chip.is_document
                       else "Show the excerpt the reply was given")
                QToolTip.showText(event.globalPos(), tip, self.viewport())
                return True
        return super().viewportEvent(event)

    def jump_to_latest(self) -> None:
        self._anchor = QPersistentModelIndex()
        self.following = True
        self.scrollToBottom()
        self._show_jump()

    def _at_end(self) -> bool:
        bar = self.verticalScrollBar()
        return bar.sliderPosition() >= bar.maximum() - AT_END_PX

    def _user_scrolled(self, _action: int) -> None:
        # Called before the bar takes the new position: sliderPosition() already holds it.
        self._anchor = QPersistentModelIndex()
        self.following = self._at_end()
        self._show_jump()

    def _range_changed(self, _low: int, high: int) -> None:
        if self._anchor.isValid():
            self.scrollTo(self.messages.index(self._anchor.row(), 0), QAbstractItemView.ScrollHint.PositionAtTop)
        elif self.following:
            self.verticalScrollBar().setValue(high)
        self._show_jump()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Page Up, arrows, Home and End scroll as the user asks, as the wheel does."""
        super().keyPressEvent(event)
        self._anchor = QPersistentModelIndex()
        self.following = self._at_end()
        self._show_jump()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._place_jump()

    def _show_jump(self) -> None:
        # Touched only when it changes: moving or showing a child of the view asks the view
        # for a layout, and a layout per frame made a streaming reply ten times slower.
        wanted = not self.following and not self._at_end()
        if wanted != self.jump_button.isVisibleTo(self):
            self.jump_button.setVisible(wanted)
            self._place_jump()

    def _place_jump(self) -> None:
        if not self.jump_button.isVisibleTo(self):
            return
        size = self.jump_button.sizeHint()
        area = self.viewport().geometry()
        self.jump_button.setGeometry(area.right() - size.width() - JUMP_MARGIN,
                                     area.bottom() - size.height() - JUMP_MARGIN, size.width(), size.height())
        self.jump_button.raise_()
