"""One conversation: its messages, its state line and the composer. Emits what the user
asks for; the controller decides what happens."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from ui.widgets.chat_side_panel import PANEL_WIDTH, ChatSidePanel
from ui.widgets.focus import focus_kept_in
from ui.widgets.message_list import MessageList
from ui.widgets.message_model import MessageListModel

PLACEHOLDER = "Message (Enter sends, Shift+Enter for a new line)"


class Composer(QPlainTextEdit):
    """Enter sends, Shift+Enter starts a new line. While a reply is being written Enter
    keeps the text (the next message can be typed, and is sent once the reply ends)."""

    submitted = Signal(str)
    can_submit = True

    def keyPressEvent(self, event: QKeyEvent) -> None:
        enter = event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)
        if enter and not event.modifiers() & Qt.KeyboardModifier.ShiftModifier:
            if not self.can_submit:
                return
            text = self.toPlainText().strip()
            if text:
                self.clear()
                self.submitted.emit(text)
            return
        super().keyPressEvent(event)


CODE_BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def code_blocks(markdown: str) -> list[str]:
    return [block.rstrip("\n") for block in CODE_BLOCK.findall(markdown)]


class ChatTab(QWidget):
    send_requested = Signal(str)
    stop_requested = Signal()
    regenerate_requested = Signal()
    edit_requested = Signal(int, str)  # message id, new text: a new branch from there
    branch_requested = Signal(int, int)  # message id, step (-1 previous, +1 next sibling)
    continue_requested = Signal()  # the last reply stopped at the token limit: write more of it
    panel_toggled = Signal(bool)  # the user opened (True) or closed the side panel

    def __init__(self, conversation_id: int, title: str, parent=None) -> None:
        super().__init__(parent)
        self.conversation_id = conversation_id
        self.title = title
        self.model = MessageListModel(self)
        self.state_label = QLabel("ready")
        self.state_label.setObjectName("tabState")
        self.view = MessageList(self.model)
        self.delegate = self.view.delegate
        self.delegate.branch_clicked.connect(self.branch_requested)
        self.composer = Composer()
        self.composer.setPlaceholderText(PLACEHOLDER)
        self.composer.setFixedHeight(96)
        self.send_button = QPushButton("Send")
        self.stop_button = QPushButton("Stop")
        self.regenerate_button = QPushButton("Regenerate")
        self.panel = ChatSidePanel()
        # Scrolls rather than sets a minimum height: the window still fits 900x600.
        self.panel_area = QScrollArea()
        self.panel_area.setWidget(self.panel)
        self.panel_area.setWidgetResizable(True)
        self.panel_area.setFrameShape(QScrollArea.Shape.NoFrame)
        self.panel_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.panel_area.setFixedWidth(PANEL_WIDTH + self.panel_area.verticalScrollBar().sizeHint().width())
        self.panel_button = QToolButton()
        self.panel_button.setText("Details")
        self.panel_button.setCheckable(True)
        self.panel_button.setToolTip("This chat's model, system prompt, sampling and last reply (Ctrl+Shift+D)")
        self._layout()
        self.composer.submitted.connect(self._submit)
        self.send_button.clicked.connect(self._send_clicked)
        self.stop_button.clicked.connect(self.stop_requested)
        self.regenerate_button.clicked.connect(self.regenerate_requested)
        self.panel_button.toggled.connect(self._panel_button_toggled)
        self.panel.continue_requested.connect(self.continue_requested)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.editing: int | None = None  # message id being edited in the composer
        self.set_panel_open(False)
        self.set_busy(False)

    def _layout(self) -> None:
        buttons = QVBoxLayout()
        for b in (self.send_button, self.stop_button, self.regenerate_button):
            buttons.addWidget(b)
        bottom = QHBoxLayout()
        bottom.addWidget(self.composer, 1)
        bottom.addLayout(buttons)
        top = QHBoxLayout()
        top.addWidget(self.state_label, 1)
        top.addWidget(self.panel_button)
        chat = QVBoxLayout()
        chat.addLayout(top)
        chat.addWidget(self.view, 1)
        chat.addLayout(bottom)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 6, 6, 6)
        layout.addLayout(chat, 1)
        layout.addWidget(self.panel_area)

    def set_panel_open(self, open_: bool) -> None:
        """Show or hide the side panel without telling anyone (the remembered state)."""
        self.panel_button.blockSignals(True)
        self.panel_button.setChecked(open_)
        self.panel_button.blockSignals(False)
        self._show_panel(open_)

    def _panel_button_toggled(self, open_: bool) -> None:
        self._show_panel(open_)
        self.panel_toggled.emit(open_)

    def _show_panel(self, open_: bool) -> None:
        self.panel_area.setVisible(open_)
        self.panel_button.setText("Hide details" if open_ else "Details")

    def _send_clicked(self) -> None:
        text = self.composer.toPlainText().strip()
        if text:
            self.composer.clear()
            self._submit(text)

    def _submit(self, text: str) -> None:
        if self.editing is not None:
            message_id, self.editing = self.editing, None
            self.composer.setPlaceholderText(PLACEHOLDER)
            self.edit_requested.emit(message_id, text)
        else:
            self.send_requested.emit(text)

    def start_editing(self, message_id: int, text: str) -> None:
        """Put a sent message back in the composer; sending it makes a new branch."""
        self.editing = message_id
        self.composer.setPlainText(text)
        self.composer.setPlaceholderText("Editing a message: Enter resends it as a new branch")
        self.composer.setFocus()

    def _context_menu(self, pos) -> None:
        index = self.view.indexAt(pos)
        if not index.isValid():
            return
        view = self.model.view(index.row())
        menu = QMenu(self)
        clipboard = QApplication.clipboard()
        menu.addAction("Copy text", lambda: clipboard.setText(view.text))
        for i, block in enumerate(code_blocks(view.text), 1):
            menu.addAction(f"Copy code block {i}", lambda b=block: clipboard.setText(b))
        if view.message_id is not None and view.role == "user":
            menu.addAction("Edit and resend…", lambda: self.start_editing(view.message_id, view.text))
        if view.branch and view.message_id is not None:
            index_, count = view.branch
            prev = menu.addAction(f"Previous branch ({index_ - 1}/{count})",
                                  lambda: self.branch_requested.emit(view.message_id, -1))
            prev.setEnabled(index_ > 1)
            nxt = menu.addAction(f"Next branch ({index_ + 1}/{count})",
                                 lambda: self.branch_requested.emit(view.message_id, 1))
            nxt.setEnabled(index_ < count)
        menu.popup(self.view.viewport().mapToGlobal(pos))

    def set_state(self, text: str) -> None:
        self.state_label.setText(text)

    def set_result(self, text: str) -> None:
        """A finished reply's numbers: a tab shows them on the message itself."""

    def set_busy(self, busy: bool) -> None:
        """While a reply is written, Stop is the action: Send (button and Enter) waits, so two
        replies never stream into one chat."""
        with focus_kept_in(self, self.composer):  # a clicked Stop, Regenerate or Continue is disabled
            self.stop_button.setEnabled(busy)
            self.send_button.setEnabled(not busy)
            self.composer.can_submit = not busy
            # Regenerate answers the last question: a chat with only its system prompt has none.
            asked = any(v.role == "user" for v in self.model.views())
            self.regenerate_button.setEnabled(not busy and asked)
            self.panel.set_busy(busy)
