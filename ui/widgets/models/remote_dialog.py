"""Asking for an OpenAI-compatible server: base URL, model and an optional API key, in one
window-modal dialog opened with open() (three static QInputDialog.getText calls each ran a
nested event loop)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLineEdit, QVBoxLayout, QWidget

DEFAULT_URL = "http://127.0.0.1:8080/v1"


class RemoteDialog(QDialog):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connect to a server")
        self.url = QLineEdit(DEFAULT_URL)
        self.model = QLineEdit()
        self.key = QLineEdit()
        self.key.setEchoMode(QLineEdit.EchoMode.Password)
        self.key.setPlaceholderText("empty for none")
        form = QFormLayout()
        form.addRow("Base URL (OpenAI-compatible):", self.url)
        form.addRow("Model:", self.model)
        form.addRow("API key:", self.key)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        box = QVBoxLayout(self)
        box.addLayout(form)
        box.addWidget(self.buttons)
        for edit in (self.url, self.model):
            edit.textChanged.connect(self._update_ok)
        self._update_ok()

    def _update_ok(self) -> None:
        ok = bool(self.url.text().strip() and self.model.text().strip())
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(ok)

    def values(self) -> tuple[str, str, str]:
        return self.url.text().strip(), self.model.text().strip(), self.key.text().strip()


def ask_remote_endpoint(parent: QWidget, chosen: Callable[[str, str, str], None]) -> RemoteDialog:
    """Opens the dialog; chosen(base URL, model, key or "") when the user accepts."""
    dialog = RemoteDialog(parent)
    dialog.finished.connect(dialog.deleteLater)
    dialog.accepted.connect(lambda: chosen(*dialog.values()))
    dialog.open()
    return dialog
