"""Settings → Tools: the app's MCP servers, each with what it runs and its state as it
changes (starting…, ready · 6 tools, failed: why, with its stderr's tail), the tools of the
one selected, Add… / Import JSON… / Remove / Restart, the tools whose calls run without
asking ("Always for this tool") with Ask again, and the tool loop's limits.

Widgets only: the controller feeds it rows (show_servers) and does what its signals ask.
Server changes happen at once (they start or stop programs); the limits go with the
window's Save, as the chat defaults do."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFontDatabase
from PySide6.QtWidgets import (
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.tools import ServerConfig
from ui.widgets.models.model_picker import FAILED, LOADING, READY, STATE_COLOURS
from ui.widgets.tools.mcp_import_dialog import McpImportDialog, ask_mcp_import
from ui.widgets.tools.mcp_server_dialog import McpServerDialog, ask_mcp_server

if TYPE_CHECKING:
    from app.tools import ServerState

ServerRow = tuple[ServerConfig, "ServerState | None"]  # None: not started (yet)
# The limits' fields as ToolSettings names them: (label, lowest, highest, suffix, tooltip).
LIMITS = {
    "output_cap": ("Tool output", 200, 10_000_000, " characters", "What the model gets of a tool's output at most"),
    "timeout_s": ("Call timeout", 1, 3600, " s", "A call that takes longer is an error result for the model"),
    "max_rounds": ("Rounds per reply", 1, 50, "", "Model turns in one reply; the last one may not call a tool"),
}
NO_SERVERS = ("No servers yet. Add… one (a command such as uvx mcp-server-time, or a URL), or Import JSON… "
              "from Claude Desktop, Cursor or LM Studio.")
STDERR_LINES = 8  # the height of the stderr box
ALWAYS_LINES = 3  # the height of the list of tools that run without asking
NO_ALWAYS = "None: every tool call asks first."
# Wide enough for a command line and a failure's reason; as tall as a few servers and tools
# need (the lists' own hints are taller, and would stretch the Chats tab with them).
PAGE_SIZE = QSize(680, 520)


def state_text(state: ServerState | None) -> str:
    """A server's state in a few words, as its row shows it."""
    if state is None:
        return "not started"
    status = state.status.value  # by value: app.tools.mcp_servers brings the MCP SDK
    if status == "starting":
        return "starting…"
    if status == "ready":
        count = len(state.tools)
        return f"ready · {count} tool{'s' if count != 1 else ''}"
    if status == "failed":
        return f"failed: {state.reason}"
    return status


def _state_colour(state: ServerState | None) -> str | None:
    status = state.status.value if state is not None else None
    return {"ready": STATE_COLOURS[READY], "starting": STATE_COLOURS[LOADING],
            "failed": STATE_COLOURS[FAILED]}.get(status or "")


class ToolsPage(QWidget):
    added = Signal(object)  # a ServerConfig from the Add dialog
    imported = Signal(object)  # a tuple of ServerConfig from the Import dialog
    remove_requested = Signal(str)  # a server's name
    restart_requested = Signal(str)
    revoke_requested = Signal(str)  # a "server/tool" key: its calls are asked about again

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolsSettings")
        self._rows: dict[str, ServerRow] = {}
        self._shown: tuple[ServerConfig, ServerState | None] | None = None  # what the details show
        self._default_limits: dict[str, float] = {}
        self.dialog: McpServerDialog | McpImportDialog | None = None  # the one open last (tests)
        self.servers = self._servers_list()
        self.add_button = self._button("&Add…", "A command run over stdio, or a streamable-HTTP URL", self._ask_add)
        self.import_button = self._button("&Import JSON…", "Paste or open an mcpServers document", self._ask_import)
        self.remove_button = self._button("&Remove", "Stop the server and forget it", self._remove)
        self.restart_button = self._button("Re&start", "Stop the server and start it again", self._restart)
        self.details = QLabel(NO_SERVERS)
        self.details.setObjectName("toolsServerDetails")
        self.details.setWordWrap(True)
        self.details.setTextFormat(Qt.TextFormat.PlainText)
        self.stderr = self._stderr_box()
        self.tool_list = self._tool_list()
        self.always_list = self._always_list()
        self.revoke_button = self._button("Ask &again", "Ask before each call of the selected tool again",
                                          self._revoke)
        self.limits = {name: self._limit_spin(name) for name in LIMITS}
        self._lay_out()
        self._show_selected()

    # ----- building --------------------------------------------------------------------------

    def _servers_list(self) -> QTreeWidget:
        tree = QTreeWidget()
        tree.setObjectName("toolsServers")
        tree.setHeaderLabels(["Server", "Runs", "State"])
        tree.setRootIsDecorated(False)
        tree.setUniformRowHeights(True)
        tree.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # a command's program and its script both show
        header = tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        tree.itemSelectionChanged.connect(self._show_selected)
        return tree

    def _tool_list(self) -> QTreeWidget:
        tree = QTreeWidget()
        tree.setObjectName("toolsOfServer")
        tree.setHeaderLabels(["Tool", "Description"])
        tree.setRootIsDecorated(False)
        tree.setWordWrap(True)
        tree.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        return tree

    def _always_list(self) -> QListWidget:
        listed = QListWidget()
        listed.setObjectName("toolsAlwaysAllowed")
        listed.setFixedHeight(listed.fontMetrics().lineSpacing() * ALWAYS_LINES + 12)
        listed.setToolTip("Answered \"Always for this tool\": their calls run in every chat without asking")
        listed.itemSelectionChanged.connect(self._always_selected)
        return listed

    def _stderr_box(self) -> QPlainTextEdit:
        box = QPlainTextEdit()
        box.setObjectName("toolsServerStderr")
        box.setReadOnly(True)
        box.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        box.setFixedHeight(box.fontMetrics().lineSpacing() * STDERR_LINES + 12)
        box.setToolTip("The end of what the server wrote to stderr")
        return box

    def _button(self, text: str, tip: str, slot) -> QPushButton:
        button = QPushButton(text)
        button.setToolTip(tip)
        button.setAutoDefault(False)  # Enter is the window's Save
        button.clicked.connect(slot)
        return button

    def _limit_spin(self, name: str) -> QSpinBox:
        _label, low, high, suffix, tip = LIMITS[name]
        spin = QSpinBox()
        spin.setObjectName(f"toolLimit_{name}")
        spin.setRange(low, high)
        spin.setSuffix(suffix)
        spin.setGroupSeparatorShown(True)
        spin.setToolTip(tip)
        return spin

    def _lay_out(self) -> None:
        buttons = QHBoxLayout()
        for button in (self.add_button, self.import_button, self.remove_button, self.restart_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        limits = QGroupBox("Limits of a chat's tool calls")
        form = QFormLayout(limits)
        for name, spin in self.limits.items():
            form.addRow(LIMITS[name][0], spin)
        note = QLabel("Servers run tools on this computer; a chat uses a server once it is turned on under the "
                      "chat's Tools button, and each call asks first. Server changes apply at once.")
        note.setWordWrap(True)
        always = QGroupBox("Run without asking")
        always_row = QHBoxLayout(always)
        always_row.addWidget(self.always_list, 1)
        always_row.addWidget(self.revoke_button, 0, Qt.AlignmentFlag.AlignTop)
        box = QVBoxLayout(self)
        box.addWidget(note)
        box.addWidget(self.servers, 2)
        box.addLayout(buttons)
        box.addWidget(self.details)
        box.addWidget(self.stderr)
        box.addWidget(self.tool_list, 3)
        box.addWidget(always)
        box.addWidget(limits)

    def sizeHint(self) -> QSize:
        return QSize(max(super().sizeHint().width(), PAGE_SIZE.width()), PAGE_SIZE.height())

    # ----- the servers -----------------------------------------------------------------------

    def show_servers(self, rows: Sequence[ServerRow]) -> None:
        """The servers in order with their states; the selection stays on the same name."""
        selected = self.selected()
        self._rows = {config.name: (config, state) for config, state in rows}
        self.servers.blockSignals(True)  # one _show_selected below, not one per row
        self.servers.clear()
        for config, state in rows:
            self.servers.addTopLevelItem(self._server_item(config, state))
        keep = selected if selected in self._rows else next(iter(self._rows), None)
        if keep is not None:
            self.select(keep)
        self.servers.blockSignals(False)
        self._show_selected()

    def _server_item(self, config: ServerConfig, state: ServerState | None) -> QTreeWidgetItem:
        item = QTreeWidgetItem([config.name, config.describe(), state_text(state)])
        colour = _state_colour(state)
        if colour is not None:
            item.setForeground(2, QBrush(QColor(colour)))
        tip = state_text(state) + (f"\n\n{state.stderr_tail}" if state is not None and state.stderr_tail else "")
        item.setToolTip(2, tip)
        item.setToolTip(1, config.describe())
        return item

    def selected(self) -> str | None:
        items = self.servers.selectedItems()
        return items[0].text(0) if items else None

    def select(self, name: str) -> None:
        for i in range(self.servers.topLevelItemCount()):
            item = self.servers.topLevelItem(i)
            if item is not None and item.text(0) == name:
                self.servers.setCurrentItem(item)  # selected, and where the arrow keys go from

    def _show_selected(self) -> None:
        name = self.selected()
        config, state = self._rows.get(name, (None, None)) if name is not None else (None, None)
        self.remove_button.setEnabled(config is not None)
        self.restart_button.setEnabled(config is not None)
        if config is not None and self._shown == (config, state):
            return  # another server's news: the tools list keeps its scroll and selection
        self._shown = (config, state) if config is not None else None
        self.tool_list.clear()
        if config is None:
            self.details.setText(NO_SERVERS if not self._rows else "Select a server to see its tools.")
            self.stderr.hide()
            return
        self.details.setText(f"{config.name}: {state_text(state)}")
        tail = state.stderr_tail if state is not None else ""
        self.stderr.setPlainText(tail)
        self.stderr.setVisible(bool(tail))
        for tool in state.tools if state is not None else ():
            item = QTreeWidgetItem([tool.name, " ".join(tool.description.split())])
            item.setToolTip(1, tool.description)
            self.tool_list.addTopLevelItem(item)

    # ----- the buttons -----------------------------------------------------------------------

    def _ask_add(self) -> None:
        self.dialog = ask_mcp_server(self, self._rows, self.added.emit)

    def _ask_import(self) -> None:
        self.dialog = ask_mcp_import(self, self.imported.emit)

    def _remove(self) -> None:
        name = self.selected()
        if name is not None:
            self.remove_requested.emit(name)

    def _restart(self) -> None:
        name = self.selected()
        if name is not None:
            self.restart_requested.emit(name)

    # ----- the tools that run without asking -------------------------------------------------

    def show_always(self, keys: Sequence[str]) -> None:
        """The "server/tool" keys approved for good, shown as "tool (server)"."""
        self.always_list.clear()
        for key in keys:
            server, tool = key.rsplit("/", 1)  # an MCP tool's name has no "/"; a server's may
            item = QListWidgetItem(f"{tool} ({server})")
            item.setData(Qt.ItemDataRole.UserRole, key)
            self.always_list.addItem(item)
        if not keys:
            item = QListWidgetItem(NO_ALWAYS)
            item.setFlags(Qt.ItemFlag.NoItemFlags)
            self.always_list.addItem(item)
        self._always_selected()

    def _always_selected(self) -> None:
        self.revoke_button.setEnabled(bool(self.always_list.selectedItems()))

    def _revoke(self) -> None:
        for item in self.always_list.selectedItems():
            self.revoke_requested.emit(item.data(Qt.ItemDataRole.UserRole))

    # ----- the limits ------------------------------------------------------------------------

    def show_limits(self, values: dict[str, float], defaults: dict[str, float]) -> None:
        """values and defaults by ToolSettings' field names; Restore Defaults shows defaults."""
        self._default_limits = dict(defaults)
        for name, spin in self.limits.items():
            spin.setValue(int(values[name]))

    def restore_limits(self) -> None:
        if self._default_limits:
            self.show_limits(self._default_limits, self._default_limits)

    def chosen_limits(self) -> dict[str, float]:
        return {name: spin.value() for name, spin in self.limits.items()}
