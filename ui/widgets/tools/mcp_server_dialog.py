"""Settings → Tools → Add…: one MCP server, a command run over stdio (its command line,
environment as KEY=VALUE lines, working folder) or a streamable-HTTP URL (headers as
"Name: value" lines). What does not make a server is said in the dialog, which stays open;
nothing starts until it does. Opened with open(), never exec()."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from pathlib import Path
from urllib.parse import urlparse

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QRadioButton,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.tools import HttpServer, McpConfigError, ServerConfig, StdioServer, server_from_command
from ui.widgets.models.model_picker import FAILED, STATE_COLOURS

LINES_TALL = 4  # rows of the environment and header boxes


class McpServerDialog(QDialog):
    chosen = Signal(object)  # the StdioServer or HttpServer made

    def __init__(self, taken: Iterable[str] = (), parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add an MCP server")
        self.setObjectName("mcpServerDialog")
        self.taken = set(taken)
        self.stdio_choice = QRadioButton("A &command (stdio)")
        self.http_choice = QRadioButton("A streamable-&HTTP URL")
        self.stdio_choice.setChecked(True)
        self.name = QLineEdit()
        self.name.setPlaceholderText("named after what it runs")
        self.pages = QStackedWidget()
        self.pages.addWidget(self._stdio_page())
        self.pages.addWidget(self._http_page())
        self.http_choice.toggled.connect(self._show_kind)
        self.error = error_label("mcpServerError")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.add_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.add_button.setText("Add")
        self.buttons.accepted.connect(self._add)  # not accept(): a server that does not parse keeps it open
        self.buttons.rejected.connect(self.reject)
        self._lay_out()

    def _lay_out(self) -> None:
        kinds = QHBoxLayout()
        kinds.addWidget(self.stdio_choice)
        kinds.addWidget(self.http_choice)
        kinds.addStretch(1)
        name = QFormLayout()
        name.addRow("&Name:", self.name)
        box = QVBoxLayout(self)
        box.addLayout(kinds)
        box.addWidget(self.pages)
        box.addLayout(name)
        box.addWidget(self.error)
        box.addWidget(self.buttons)
        self.resize(560, self.sizeHint().height())

    def _stdio_page(self) -> QWidget:
        self.command = QLineEdit()
        self.command.setPlaceholderText("uvx mcp-server-time --local-timezone UTC")
        self.env = _lines_box("API_KEY=…")
        self.cwd = QLineEdit()
        self.cwd.setPlaceholderText("the app's own")
        browse = QPushButton("Browse…")
        browse.setAutoDefault(False)
        browse.clicked.connect(self._browse)
        folder = QHBoxLayout()
        folder.addWidget(self.cwd, 1)
        folder.addWidget(browse)
        page = QWidget()
        form = QFormLayout(page)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("Co&mmand line:", self.command)
        form.addRow("&Environment:", self.env)
        label = QLabel("&Working folder:")
        label.setBuddy(self.cwd)  # a row of a layout has no buddy of its own
        form.addRow(label, folder)
        return page

    def _http_page(self) -> QWidget:
        self.url = QLineEdit()
        self.url.setPlaceholderText("https://example.com/mcp")
        self.headers = _lines_box("Authorization: Bearer …")
        page = QWidget()
        form = QFormLayout(page)
        form.setContentsMargins(0, 0, 0, 0)
        form.addRow("&URL:", self.url)
        form.addRow("H&eaders:", self.headers)
        return page

    def _show_kind(self, http: bool) -> None:
        self.pages.setCurrentIndex(1 if http else 0)
        self.name.setPlaceholderText("named after its host" if http else "named after what it runs")
        self.error.hide()  # it was about the other kind's fields

    def _browse(self) -> None:
        dialog = QFileDialog(self, "Working folder", self.cwd.text())
        dialog.setFileMode(QFileDialog.FileMode.Directory)
        dialog.setOption(QFileDialog.Option.ShowDirsOnly)
        dialog.finished.connect(dialog.deleteLater)
        dialog.fileSelected.connect(lambda path: self.cwd.setText(path) if path else None)
        dialog.open()

    # ----- what the fields make --------------------------------------------------------------

    def server(self) -> ServerConfig:
        """The server the fields describe; McpConfigError says which field is wrong."""
        name = self.name.text().strip()
        if name in self.taken:
            raise McpConfigError(f"Name: there is a server named {name!r} already; remove it first or pick another")
        return self._http(name) if self.http_choice.isChecked() else self._stdio(name)

    def _stdio(self, name: str) -> StdioServer:
        line = self.command.text().strip()
        if not line:
            raise McpConfigError("Command line: write the program to run, with its arguments")
        try:
            server = server_from_command(line, self.taken)  # named after what it runs
        except McpConfigError as exc:  # "--mcp 'line': why", as the terminal's option reads
            raise McpConfigError(f"Command line: {str(exc).rsplit(': ', 1)[-1]}") from None
        env = _pairs(self.env.toPlainText(), "=", "Environment", "KEY=VALUE")
        return replace(server, name=name or server.name, env=env, cwd=self._folder())

    def _folder(self) -> str | None:
        text = self.cwd.text().strip()
        if not text:
            return None
        folder = Path(text).expanduser()  # the child is started without a shell: no ~ there
        if not folder.is_dir():
            raise McpConfigError(f"Working folder: {text} is not a folder")
        return str(folder)

    def _http(self, name: str) -> HttpServer:
        url = self.url.text().strip()
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise McpConfigError("URL: write the server's http:// or https:// address")
        headers = _pairs(self.headers.toPlainText(), ":", "Headers", "Name: value")
        return HttpServer(name or _unique(parsed.hostname or "server", self.taken), url, headers)

    def _add(self) -> None:
        try:
            server = self.server()
        except McpConfigError as exc:
            self.error.setText(str(exc))
            self.error.show()
            return
        self.error.hide()
        self.chosen.emit(server)
        self.accept()


def error_label(object_name: str) -> QLabel:
    """A dialog's line saying what is wrong (hidden until something is)."""
    label = QLabel()
    label.setObjectName(object_name)
    label.setWordWrap(True)
    label.setTextFormat(Qt.TextFormat.PlainText)  # a name or path may hold '<'
    label.setStyleSheet(f"color: {STATE_COLOURS[FAILED]};")
    label.hide()
    return label


def _lines_box(placeholder: str) -> QPlainTextEdit:
    box = QPlainTextEdit()
    box.setPlaceholderText(f"{placeholder}\none a line")
    box.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
    box.setTabChangesFocus(True)
    box.setFixedHeight(box.fontMetrics().lineSpacing() * LINES_TALL + 12)
    return box


def _pairs(text: str, separator: str, field: str, shape: str) -> dict[str, str]:
    """'KEY=VALUE' (or 'Name: value') lines as a dict; blank lines are skipped."""
    pairs: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, found, value = line.partition(separator)
        if not found or not key.strip():
            raise McpConfigError(f"{field}, line {number}: write {shape}, got {line.strip()!r}")
        pairs[key.strip()] = value.strip()
    return pairs


def _unique(name: str, taken: set[str]) -> str:
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name}-{n}", n + 1
    return unique


def ask_mcp_server(parent: QWidget, taken: Iterable[str], chosen: Callable[[ServerConfig], None]) -> McpServerDialog:
    """Opens the dialog (window-modal); chosen(server) once the user adds one that parses."""
    dialog = McpServerDialog(taken, parent)
    dialog.finished.connect(dialog.deleteLater)
    dialog.chosen.connect(chosen)
    dialog.open()
    return dialog
