"""The scrolling list of one conversation's messages, used by chat tabs and compare panes.

It follows the newest text (new rows, a reply growing, the list redrawn after Save prompt or
reopened mid-reply, a narrower column when Details open) unless the user scrolled up; then
it stays put and offers a "Jump to latest" button. A chat opened at a search hit shows that
message instead, until the user scrolls."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QEvent, QPersistentModelIndex, QPoint, QRect, Qt, QTimer
from PySide6.QtGui import QHelpEvent, QKeyEvent, QMouseEvent, QResizeEvent
from PySide6.QtWidgets import QAbstractItemView, QListView, QStyleOptionViewItem, QToolButton, QToolTip

from ui.widgets.chat.message_chips import MessageChip
from ui.widgets.chat.message_delegate import MessageDelegate
from ui.widgets.chat.message_model import RUNNING, MessageListModel, MessageView
from ui.widgets.chat.tool_chips import ChipBox
from ui.widgets.tools.tool_approval import ToolApproval

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
        # A tool call waiting for the user: its buttons, laid over the room its chip leaves.
        self.approval = ToolApproval(self.viewport())
        self.delegate.tools.approval_height = self.approval.height_for
        self._placing = QTimer(self, singleShot=True, interval=0)
        self._placing.timeout.connect(self.place_approval)
        self.approval.asked.connect(self._place_soon)
        for signal in (model.modelReset, model.rowsInserted, model.dataChanged, model.layoutChanged,
                       self.delegate.sizeHintChanged, bar.valueChanged, bar.rangeChanged):
            signal.connect(self._place_soon)
        # A running call's time, on its chip, once a second (a repaint: no layout).
        self._ticking = QTimer(self, interval=1000)
        self._ticking.timeout.connect(self._tick)
        model.modelReset.connect(self._watch_running)
        model.dataChanged.connect(lambda first, last, *_: self._watch_running(first.row(), last.row()))
        self._watch_running()

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
        return self.delegate.chip_boxes(self._option(row), self.messages.view(row))

    def chip_under(self, pos: QPoint) -> MessageChip | None:
        """The chip at pos (viewport coordinates), if any."""
        index = self.indexAt(pos)
        if not index.isValid():
            return None
        return next((chip for chip, box in self.chip_boxes(index.row()) if box.contains(pos)), None)

    def _option(self, row: int) -> QStyleOptionViewItem:
        option = QStyleOptionViewItem()
        self.initViewItemOption(option)
        option.rect = self.visualRect(self.messages.index(row, 0))
        return option

    def tool_chips(self, row: int) -> list[tuple[ChipBox, QRect]]:
        """A row's tool chips with their boxes in the viewport's coordinates."""
        option, view = self._option(row), self.messages.view(row)
        origin = self.delegate.tools_origin(option, view)
        return [(box, box.rect.translated(origin)) for box in self.delegate.tool_boxes(option, view)]

    def open_calls(self, call_ids: list[str]) -> None:
        """Those calls' chips opened (the rows holding them laid out again)."""
        for call_id in call_ids:
            self.delegate.tools.opened[call_id] = True
        for row, view in enumerate(self.messages.views()):
            if any(c.call_id in call_ids for c in view.calls):
                self.delegate.sizeHintChanged.emit(self.messages.index(row, 0))

    def _place_soon(self, *_args) -> None:
        if self.approval.isVisibleTo(self):
            self._placing.start()

    def place_approval(self) -> None:
        """The approval's buttons over the room its call's chip leaves for them (while it is
        asked nothing streams in this chat: moving it costs no frame)."""
        approval = self.approval
        if not approval.isVisibleTo(self):
            return
        for row in range(self.messages.rowCount() - 1, -1, -1):
            view = self.messages.view(row)
            if any(c.call_id == approval.call_id for c in view.calls):
                option = self._option(row)
                origin = self.delegate.tools_origin(option, view)
                box = next(b for b in self.delegate.tool_boxes(option, view) if b.call.call_id == approval.call_id)
                if box.approval is not None:
                    approval.arrange(box.approval.width())
                    approval.setGeometry(box.approval.translated(origin))
                    return
        approval.setGeometry(QRect(0, 0, 0, 0))  # its chip not shown yet (the branch is loading)

    def _running(self, rows: range) -> bool:
        return any(c.state == RUNNING for row in rows for c in self.messages.view(row).calls)

    def _watch_running(self, first: int = 0, last: int | None = None) -> None:
        """Rows changed (only those are read: a streaming reply changes one a frame)."""
        last = self.messages.rowCount() - 1 if last is None else last
        if not self._ticking.isActive() and self._running(range(first, last + 1)):
            self._ticking.start()

    def _tick(self) -> None:
        if self._running(range(self.messages.rowCount())):
            self.viewport().update()
        else:
            self._ticking.stop()

    def viewportEvent(self, event: QEvent) -> bool:
        """Over a chip the pointer is a hand and the tooltip says what a click opens."""
        if event.type() == QEvent.Type.MouseMove and isinstance(event, QMouseEvent):
            at = event.position().toPoint()
            if self.chip_under(at) is not None or self._tool_chip_under(at) is not None:
                self.viewport().setCursor(Qt.CursorShape.PointingHandCursor)
            else:
                self.viewport().unsetCursor()
        elif event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            chip = self.chip_under(event.pos())
            if chip is None and self._tool_chip_under(event.pos()) is not None:
                QToolTip.showText(event.globalPos(), "Show or hide the call's arguments and result", self.viewport())
                return True
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

    def _tool_chip_under(self, pos: QPoint) -> ChipBox | None:
        index = self.indexAt(pos)
        if not index.isValid() or not self.messages.view(index.row()).calls:
            return None
        return self.delegate.tool_chip_at(self._option(index.row()), self.messages.view(index.row()), pos)

    def _chip_key(self, event: QKeyEvent) -> bool:
        """Enter or Space opens or closes the current row's focused tool chip; Left and Right
        move among its chips (a ring shows which)."""
        index = self.currentIndex()
        view = self.messages.view(index.row()) if index.isValid() else None
        if view is None or not view.calls or event.modifiers() & ~Qt.KeyboardModifier.KeypadModifier:
            return False
        tools = self.delegate.tools
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space):
            tools.toggle(view.calls[tools.focused(view)])
            self.delegate.sizeHintChanged.emit(index)
            return True
        if event.key() in (Qt.Key.Key_Left, Qt.Key.Key_Right) and \
                tools.move_focus(view, -1 if event.key() == Qt.Key.Key_Left else 1):
            self.viewport().update()
            return True
        return False

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Page Up, arrows, Home and End scroll as the user asks, as the wheel does."""
        if self._chip_key(event):
            return
        super().keyPressEvent(event)
        self._anchor = QPersistentModelIndex()
        self.following = self._at_end()
        self._show_jump()

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self._place_jump()
        self._place_soon()

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
