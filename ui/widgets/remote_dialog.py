"""Asking for an OpenAI-compatible server: base URL, model and an optional API key."""

from __future__ import annotations

from PySide6.QtWidgets import QInputDialog, QLineEdit, QWidget

DEFAULT_URL = "http://127.0.0.1:8080/v1"


def ask_remote_endpoint(parent: QWidget) -> tuple[str, str, str] | None:
    """(base URL, model, key or "") or None when the user cancels."""
    title = "Connect to a server"
    url, ok = QInputDialog.getText(parent, title, "Base URL (OpenAI-compatible):", text=DEFAULT_URL)
    if not ok or not url.strip():
        return None
    model, ok = QInputDialog.getText(parent, title, "Model:")
    if not ok or not model.strip():
        return None
    key, ok = QInputDialog.getText(parent, title, "API key (empty for none):", QLineEdit.EchoMode.Password)
    if not ok:
        return None
    return url.strip(), model.strip(), key.strip()
