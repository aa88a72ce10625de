"""One conversation: its messages, its state line and the composer. Emits what the user
asks for; the controller decides what happens."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QApplication,
    QHBoxLayout,
    QLabel,
    QMenu,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from storage import NewDocument
from ui.widgets.chat.chat_side_panel import PANEL_WIDTH, ChatSidePanel
from ui.widgets.chat.composer import Composer, ComposerBox
from ui.widgets.chat.context_meter import ContextMeter
from ui.widgets.chat.file_drops import accept_file_drops
from ui.widgets.chat.message_actions import MessageActions
from ui.widgets.chat.message_delegate import READING_WIDTH
from ui.widgets.chat.message_list import MessageList
from ui.widgets.chat.message_model import MessageListModel, MessageView
from ui.widgets.common.banner import Banner
from ui.widgets.common.focus import focus_kept_in

PLACEHOLDER = "Message (Enter sends, Shift+Enter for a new line)"


CODE_BLOCK = re.compile(r"```[^\n]*\n(.*?)```", re.DOTALL)


def code_blocks(markdown: str) -> list[str]:
    return [block.rstrip("\n") for block in CODE_BLOCK.findall(markdown)]


__all__ = ["ChatTab", "Composer", "code_blocks"]


class ChatTab(QWidget):
    send_requested = Signal(str, object)  # the text, and the documents attached (a tuple of NewDocument)
    document_requested = Signal(str, str)  # sha256, name: a chip on a sent message was clicked
    image_requested = Signal(str, str)  # sha256, name: an image's thumbnail on a sent message was clicked
    source_requested = Signal(object)  # a SourceRecord: a citation chip on a reply was clicked
    stop_requested = Signal()
    regenerate_requested = Signal()
    edit_requested = Signal(int, str)  # message id, new text: a new branch from there
    reply_edit_requested = Signal(int, str)  # an assistant reply's id, its edited text: a sibling, no generation
    delete_requested = Signal(int, bool)  # message id, confirmed (its replies go with it)
    regenerate_message_requested = Signal(int)  # an assistant reply: another answer beside it
    branch_out_requested = Signal(int)  # message id: a new chat of the path down to it
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
        self.view.setAccessibleName("Messages")
        self.delegate = self.view.delegate
        self.delegate.branch_clicked.connect(self.branch_requested)
        self.delegate.document_clicked.connect(self.document_requested)
        self.delegate.image_clicked.connect(self.image_requested)
        self.delegate.source_clicked.connect(self.source_requested)
        self.composer_box = ComposerBox(PLACEHOLDER)
        self.composer = self.composer_box.composer
        self.send_button = self.composer_box.send_button
        self.stop_button = self.composer_box.stop_button
        self.regenerate_button = QPushButton("Regenerate")
        self.regenerate_button.setObjectName("regenerateButton")
        self.regenerate_button.setToolTip("Another answer to the last question (the old one stays, ‹ › on the message)")
        self.panel = ChatSidePanel()
        # Scrolls rather than sets a minimum height: the window still fits 900x600.
        self.panel_area = QScrollArea()
        self.panel_area.setWidget(self.panel)
        self.panel_area.setWidgetResizable(True)
        self.panel_area.setFrameShape(QScrollArea.Shape.NoFrame)
        self.panel_area.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.panel_area.setFixedWidth(PANEL_WIDTH + self.panel_area.verticalScrollBar().sizeHint().width())
        self.context_meter = ContextMeter()
        self.approval = self.view.approval  # a tool call waiting for the user: in its chip
        self.tools_button = self.composer_box.tools_button
        self.tools_menu = self.composer_box.tools_menu
        self.tools_button.show()
        self.panel_button = QToolButton()
        self.panel_button.setText("Details")
        self.panel_button.setCheckable(True)
        self.panel_button.setToolTip("This chat's model, system prompt, sampling and last reply (Ctrl+Shift+D)")
        # "Editing a message · Cancel" above the composer while an edit is in it
        self.edit_banner = Banner("", "Stop editing; the message stays as it was", "editBanner")
        self.edit_banner.cancelled.connect(self.cancel_editing)
        self._layout()
        self.composer.submitted.connect(self._submit)
        self.send_button.clicked.connect(self.composer.submit)  # as Enter does
        self.stop_button.clicked.connect(self.stop_requested)
        self.regenerate_button.clicked.connect(self.regenerate_requested)
        self.panel_button.toggled.connect(self._panel_button_toggled)
        self.panel.continue_requested.connect(self.continue_requested)
        self.view.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.view.customContextMenuRequested.connect(self._context_menu)
        self.drops = accept_file_drops(self, self.composer_box.attach)  # anywhere on the tab
        self._sent_documents: tuple[NewDocument, ...] = ()  # given back if the message is not stored
        self.editing: int | None = None  # message id being edited in the composer
        self.editing_role = "user"
        self._draft = ""  # what the composer held before an edit: Cancel puts it back
        self.busy = False
        self.continuable: int | None = None  # the reply cut at the token limit, if any
        self.delete_box: QMessageBox | None = None  # the confirmation open, if any
        self.actions = MessageActions(self.view, self._actions_for)
        self.actions.triggered.connect(self._message_action)
        self.set_panel_open(False)
        self.set_busy(False)

    def _layout(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.state_label, 1)
        top.addWidget(self.regenerate_button)
        top.addWidget(self.context_meter)
        top.addWidget(self.panel_button)
        chat = QVBoxLayout()
        chat.addLayout(top)
        chat.addWidget(self.view, 1)
        chat.addWidget(self.edit_banner)
        # Under the reading column on a wide window (its width and place), as wide as the pane
        # in a narrow one: the eye goes from the reply to the box straight down.
        self.composer_box.setMaximumWidth(READING_WIDTH)
        under_the_column = QHBoxLayout()
        under_the_column.addStretch(1)  # the room past its widest goes to both sides alike
        under_the_column.addWidget(self.composer_box, 1000)
        under_the_column.addStretch(1)
        chat.addLayout(under_the_column)
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

    def restore_unsent(self, text: str, documents: Sequence[NewDocument] | None = None) -> None:
        """A message that could not be stored goes back into the composer, before anything
        typed since, with the files it carried (documents, or those sent last), so nothing
        is lost and Send tries again."""
        typed = self.composer.toPlainText()
        self.composer.setPlainText(text + ("\n" + typed if typed.strip() else ""))
        self.composer_box.restore_documents(self._sent_documents if documents is None else documents)
        self._sent_documents = ()
        self.composer.setFocus()

    def unsent_text(self) -> str:
        """What the user typed and has not sent; during an edit, the draft the edit set aside."""
        return self._draft if self.editing is not None else self.composer.toPlainText()

    def unsent_files(self) -> list[Path]:
        """The files attached and not sent (their chips)."""
        return self.composer_box.tray.paths()

    def unsent_pasted_images(self) -> list[tuple[str, bytes]]:
        """The images pasted and not sent (no file of their own): name and PNG bytes."""
        return self.composer_box.tray.pasted_images()

    def restore_draft(self, text: str, files: Sequence[Path]) -> None:
        """A draft kept over a restart: its text (unless something was typed since) and its
        files, read again (a chip says so if one cannot be read any more)."""
        if text and not self.composer.toPlainText():
            self.composer.setPlainText(text)
        if files and not self.composer_box.tray.chips():
            self.composer_box.attach(files)

    def _submit(self, text: str) -> None:
        if self.editing is None:
            self._sent_documents = self.composer_box.take_documents()
            self.send_requested.emit(text, self._sent_documents)
            return
        message_id, role = self.editing, self.editing_role
        self._end_editing()
        if role == "assistant":
            self.reply_edit_requested.emit(message_id, text)
        else:
            self.edit_requested.emit(message_id, text)

    def start_editing(self, message_id: int, text: str, role: str = "user") -> None:
        """Put a message back in the composer. Sending a question makes a new branch from it
        with a new reply; sending an edited reply saves it beside the reply, nothing generated."""
        if self.editing is None:
            self._draft = self.composer.toPlainText()
        self.editing, self.editing_role = message_id, role
        self.composer.setPlainText(text)
        reply = role == "assistant"
        self.edit_banner.set_text("Editing a reply · saved as a new branch" if reply else "Editing a message ·")
        self.composer.setPlaceholderText("Enter saves the reply as a new branch" if reply
                                         else "Editing a message: Enter resends it as a new branch")
        self.edit_banner.show()
        self.composer.setFocus()

    def cancel_editing(self) -> None:
        draft = self._draft
        self._end_editing()
        self.composer.setPlainText(draft)
        self.composer.setFocus()

    def _end_editing(self) -> None:
        self.editing, self._draft = None, ""
        self.edit_banner.hide()
        self.composer.setPlaceholderText(PLACEHOLDER)

    # ----- the hover actions -------------------------------------------------------------

    def _actions_for(self, view: MessageView) -> list[str]:
        """What the bar offers on a message. A system prompt is edited in Details; while a
        reply is written only Copy (the branch on screen is changing)."""
        if view.message_id is None or view.role not in ("user", "assistant") or self.busy:
            return ["copy"]
        names = ["copy", "edit", "delete"] + (["regenerate"] if view.role == "assistant" else [])
        return names + ["branch"] + (["continue"] if view.message_id == self.continuable else [])

    def _message_action(self, name: str, view: MessageView) -> None:
        message_id = view.message_id
        if name == "copy":
            QApplication.clipboard().setText(view.text)
        elif message_id is None:
            return
        elif name == "edit":
            self.start_editing(message_id, view.text, view.role)
        elif name == "delete":
            self.delete_requested.emit(message_id, False)
        elif name == "regenerate":
            self.regenerate_message_requested.emit(message_id)
        elif name == "branch":
            self.branch_out_requested.emit(message_id)
        elif name == "continue":
            self.continue_requested.emit()

    def confirm_delete(self, message_id: int, replies: int) -> None:
        """The message has replies: they go with it, once the user says so (open(), never exec())."""
        box = QMessageBox(QMessageBox.Icon.Question, "Delete message",
                          f"Delete this message and the {replies} message{'s' if replies != 1 else ''} after it "
                          "(in every branch)?", QMessageBox.StandardButton.Cancel, self)
        box.addButton("Delete", QMessageBox.ButtonRole.DestructiveRole)
        box.setDefaultButton(QMessageBox.StandardButton.Cancel)

        def clicked(button) -> None:
            if box.buttonRole(button) == QMessageBox.ButtonRole.DestructiveRole:
                self.delete_requested.emit(message_id, True)

        box.buttonClicked.connect(clicked)
        box.finished.connect(lambda _result: setattr(self, "delete_box", None))
        box.finished.connect(box.deleteLater)
        self.delete_box = box
        box.open()

    def set_continuable(self, message_id: int | None) -> None:
        """The reply that stopped at the token limit (its bubble offers Continue), or None."""
        if message_id != self.continuable:
            self.continuable = message_id
            self.actions.dismiss()  # what it offers changed

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
            self.composer_box.set_busy(busy)
            if busy != self.busy:
                self.busy = busy
                self.actions.dismiss()  # what it offers depends on it
            # Regenerate answers the last question: a chat with only its system prompt has none.
            asked = any(v.role == "user" for v in self.model.views())
            self.regenerate_button.setEnabled(not busy and asked)
            self.panel.set_busy(busy)
