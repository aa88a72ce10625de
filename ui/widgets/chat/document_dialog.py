"""A document's extracted text, or one excerpt a reply cited, in a window of its own: not
modal (the chat goes on beside it) and read-only. It opens at once saying "Loading…"; the
text comes from the storage thread."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout, QWidget


class DocumentTextDialog(QDialog):
    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("documentDialog")
        self.setWindowTitle(title)
        self.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        self.setModal(False)
        self.resize(640, 520)
        self.details = QLabel("Loading…")
        self.details.setObjectName("documentDetails")
        self.details.setWordWrap(True)
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setObjectName("documentText")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.details)
        layout.addWidget(self.text, 1)
        layout.addWidget(buttons)

    def show_text(self, details: str, text: str) -> None:
        self.details.setText(details)
        self.text.setPlainText(text)
        self.text.moveCursor(self.text.textCursor().MoveOperation.Start)

    def show_error(self, message: str) -> None:
        self.details.setText(message)
        self.details.setProperty("failed", True)
        self.details.style().polish(self.details)


def open_document_dialog(parent: QWidget, title: str) -> DocumentTextDialog:
    """Shown (show(), never exec()): the caller fills it when the text is read."""
    dialog = DocumentTextDialog(title, parent)
    dialog.show()
    return dialog
