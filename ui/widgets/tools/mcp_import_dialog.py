"""Settings → Tools → Import JSON…: servers from the `mcpServers` JSON that Claude Desktop,
Cursor and LM Studio keep, pasted or read from a file. A document that does not parse
shows McpConfigError's one line and the dialog stays open: nothing is imported."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout, QWidget

from app.tools import McpConfigError, ServerConfig, parse_mcp_servers
from ui.widgets.common.file_dialogs import open_file_dialog
from ui.widgets.tools.mcp_server_dialog import error_label

EXAMPLE = '{"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"]}}}'
LARGEST_FILE = 1_000_000  # bytes: a settings file, not anything bigger the picker was pointed at


class McpImportDialog(QDialog):
    chosen = Signal(object)  # the servers, a tuple of ServerConfig

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Import MCP servers")
        self.setObjectName("mcpImportDialog")
        note = QLabel("Paste an <b>mcpServers</b> document (claude_desktop_config.json, Cursor's mcp.json, "
                      "LM Studio's mcp.json). A server of a name already here is replaced.")
        note.setWordWrap(True)
        self.text = QPlainTextEdit()
        self.text.setObjectName("mcpImportText")
        self.text.setPlaceholderText(EXAMPLE)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.error = error_label("mcpImportError")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.import_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.import_button.setText("Import")
        self.file_button = QPushButton("Open file…")
        self.buttons.addButton(self.file_button, QDialogButtonBox.ButtonRole.ActionRole)
        self.file_button.clicked.connect(self._pick_file)
        self.buttons.accepted.connect(self._import)
        self.buttons.rejected.connect(self.reject)
        box = QVBoxLayout(self)
        box.addWidget(note)
        box.addWidget(self.text, 1)
        box.addWidget(self.error)
        box.addWidget(self.buttons)
        self.resize(600, 380)

    def _pick_file(self) -> None:
        open_file_dialog(self, "Import MCP servers", "JSON (*.json);;All files (*)", lambda path, _f: self.read(path))

    def read(self, path: str) -> None:
        """The file's text into the box, to be looked at before Import."""
        try:
            with open(path, "rb") as f:
                data = f.read(LARGEST_FILE + 1)
        except OSError as exc:
            self._show_error(f"cannot read {path}: {exc.strerror or exc}")
            return
        if len(data) > LARGEST_FILE:
            self._show_error(f"{path} is larger than a settings file")
            return
        self.text.setPlainText(data.decode("utf-8", "replace"))
        self.error.hide()

    def _import(self) -> None:
        try:
            servers = parse_mcp_servers(self.text.toPlainText())
        except McpConfigError as exc:
            self._show_error(str(exc))
            return
        if not servers:
            self._show_error("mcpServers: it has no servers (or only disabled ones)")
            return
        self.chosen.emit(servers)
        self.accept()

    def _show_error(self, text: str) -> None:
        self.error.setText(text)
        self.error.show()


def ask_mcp_import(parent: QWidget, chosen: Callable[[tuple[ServerConfig, ...]], None]) -> McpImportDialog:
    """Opens the dialog (window-modal); chosen(servers) once a document parses."""
    dialog = McpImportDialog(parent)
    dialog.finished.connect(dialog.deleteLater)
    dialog.chosen.connect(chosen)
    dialog.open()
    return dialog
