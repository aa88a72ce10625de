"""One conversation: its messages, its state line and the composer. Emits what the user
asks for; the controller decides what happens."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QLabel,
    QListView,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ui.message_delegate import MessageDelegate
from ui.message_model import MessageListModel


class Composer(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line."""

    submitted = Signal(str)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            text = self.toPlainText().strip()
            if text:
                self.clear()
                self.submitted.emit(text)
            return
        super().keyPressEvent(event)


class ChatTab(QWidget):
    send_requested = Signal(str)
    stop_requested = Signal()
    regenerate_requested = Signal()

    def __init__(self, conversation_id: int, title: str, parent=None) -> None:
        super().__init__(parent)
        self.conversation_id = conversation_id
        self.title = title
        self.model = MessageListModel(self)
        self.state_label = QLabel("ready")
        self.state_label.setObjectName("tabState")
        self.view = QListView()
        self.view.setModel(self.model)
        self.view.setItemDelegate(MessageDelegate(self.view))
        self.view.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.setUniformItemSizes(False)
        self.view.setWordWrap(True)
        self.view.setResizeMode(QListView.ResizeMode.Adjust)
        self.composer = Composer()
        self.composer.setPlaceholderText("Message (Enter sends, Shift+Enter for a new line)")
        self.composer.setFixedHeight(70)
        self.send_button = QPushButton("Send")
        self.stop_button = QPushButton("Stop")
        self.regenerate_button = QPushButton("Regenerate")
        self._layout()
        self.composer.submitted.connect(self.send_requested)
        self.send_button.clicked.connect(self._send_clicked)
        self.stop_button.clicked.connect(self.stop_requested)
        self.regenerate_button.clicked.connect(self.regenerate_requested)
        self.model.rowsInserted.connect(lambda *_: self.view.scrollToBottom())
        self.model.dataChanged.connect(self._follow_stream)
        self.set_busy(False)

    def _layout(self) -> None:
        buttons = QVBoxLayout()
        for b in (self.send_button, self.stop_button, self.regenerate_button):
            buttons.addWidget(b)
        bottom = QHBoxLayout()
        bottom.addWidget(self.composer, 1)
        bottom.addLayout(buttons)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addWidget(self.state_label)
        layout.addWidget(self.view, 1)
        layout.addLayout(bottom)

    def _send_clicked(self) -> None:
        text = self.composer.toPlainText().strip()
        if text:
            self.composer.clear()
            self.send_requested.emit(text)

    def _follow_stream(self, first, _last, _roles=()) -> None:
        # Keep the newest text in sight while it streams, unless the user scrolled up.
        bar = self.view.verticalScrollBar()
        if first.row() == self.model.rowCount() - 1 and bar.value() >= bar.maximum() - 80:
            self.view.scrollToBottom()

    def set_state(self, text: str) -> None:
        self.state_label.setText(text)

    def set_busy(self, busy: bool) -> None:
        self.stop_button.setEnabled(busy)
        self.regenerate_button.setEnabled(not busy and self.model.rowCount() > 0)
