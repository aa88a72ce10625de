"""Jobs → New job…: an input file (CSV with a header row, or JSONL), a prompt template
($column), a system prompt, the max tokens of each answer and an optional JSON Schema every
answer must follow (typed, or loaded from a file), the tools each item's model may call (the
window's MCP servers and the web tools, each call run without asking: choosing them approves
them; kept with the job); the first three rows' prompts are
previewed (or their errors, or why the schema cannot be enforced) before Start is offered.
The controller reads the files and renders the preview (app/jobs/form.py); the dialog only
shows them."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from app.jobs import JobForm, JobTools, Preview
from app.tools import ServerConfig
from ui.widgets.common.file_dialogs import open_file_dialog, open_folder_dialog

INPUT_FILTERS = "Rows (*.csv *.jsonl *.ndjson);;CSV (*.csv);;JSON Lines (*.jsonl *.ndjson)"
SCHEMA_FILTERS = "JSON Schema (*.json);;All files (*)"
WEB_TOOLS = "Web tools (fetch, web_search)"


class NewJobDialog(QDialog):
    file_chosen = Signal(str)  # the input's path: read it (off the GUI thread), then preview
    form_changed = Signal()  # the template or settings changed: preview again
    start_requested = Signal(str, object)  # the input's path, the JobForm
    schema_file_chosen = Signal(str)  # a JSON Schema file: read it (off the GUI thread) into the box

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("New job")
        self.resize(640, 640)
        self.path_edit = QLineEdit()
        self.path_edit.setPlaceholderText("A CSV file (its first row names the columns), a JSONL file, or a folder "
                                          "(an item a file: $file)")
        self.path_edit.setAccessibleName("Input file")
        self.path_edit.editingFinished.connect(lambda: self.file_chosen.emit(self.path_edit.text().strip()))
        self.browse_button = QPushButton("Browse…")
        self.browse_button.clicked.connect(self.browse)
        self.folder_button = QPushButton("Folder…")
        self.folder_button.setToolTip("Every file of a folder: an item each, the file attached to its prompt")
        self.folder_button.clicked.connect(self.browse_folder)
        path_row = QHBoxLayout()
        path_row.addWidget(self.path_edit, 1)
        path_row.addWidget(self.browse_button)
        path_row.addWidget(self.folder_button)
        self.template_edit = QPlainTextEdit()
        self.template_edit.setPlaceholderText("Write a one-line greeting for $name from $city.")
        self.template_edit.setAccessibleName("Prompt template")
        self.template_edit.setTabChangesFocus(True)
        self.template_edit.setMaximumHeight(120)  # the preview below gets the room
        self.template_edit.textChanged.connect(self.form_changed.emit)
        self.system_edit = QLineEdit()
        self.system_edit.setPlaceholderText("None")
        self.system_edit.setAccessibleName("System prompt")
        self.system_edit.textChanged.connect(lambda _t: self.form_changed.emit())
        self.max_tokens = QSpinBox()
        self.max_tokens.setRange(1, 32768)
        self.max_tokens.setValue(256)
        self.max_tokens.setAccessibleName("Max tokens")
        self.max_tokens.valueChanged.connect(lambda _v: self.form_changed.emit())
        self.schema_edit = QPlainTextEdit()
        self.schema_edit.setPlaceholderText('Optional. {"type": "object", "properties": {"name": {"type": "string"}}}')
        self.schema_edit.setAccessibleName("JSON Schema")
        self.schema_edit.setTabChangesFocus(True)
        self.schema_edit.setMaximumHeight(90)
        self.schema_edit.textChanged.connect(self.form_changed.emit)
        self.schema_button = QPushButton("Load…")
        self.schema_button.setAccessibleName("Load a JSON Schema file")
        self.schema_button.clicked.connect(self.browse_schema)
        schema_row = QHBoxLayout()
        schema_row.addWidget(self.schema_edit, 1)
        schema_row.addWidget(self.schema_button)
        self.tools_list = QListWidget()
        self.tools_list.setAccessibleName("Tools")
        self.tools_list.setToolTip("Checked: each item's model may call this server's tools, without asking")
        self.tools_list.setMaximumHeight(72)
        self.tools_list.itemChanged.connect(lambda _i: self.form_changed.emit())
        self.tools_required = QCheckBox("Each item's first turn must call a tool")
        self.tools_required.toggled.connect(lambda _on: self.form_changed.emit())
        tools_box = QVBoxLayout()
        tools_box.addWidget(self.tools_list)
        tools_box.addWidget(self.tools_required)
        self._servers: dict[str, ServerConfig] = {}
        self._web: dict | None = None
        self._tool_limits: dict = {}
        self.preview_box = QPlainTextEdit()
        self.preview_box.setReadOnly(True)
        self.preview_box.setAccessibleName("Preview")
        self.preview_box.setPlaceholderText("Choose an input file: its first three prompts show here.")
        form = QFormLayout()
        form.addRow("Input", path_row)
        form.addRow("Prompt template", self.template_edit)
        form.addRow("System prompt", self.system_edit)
        form.addRow("Max tokens", self.max_tokens)
        form.addRow("JSON Schema", schema_row)
        form.addRow("Tools", tools_box)
        form.addRow("Preview", self.preview_box)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.start_button = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        self.start_button.setText("Start")
        self.start_button.setEnabled(False)
        self.buttons.accepted.connect(self._start)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(self.buttons)

    def browse(self) -> None:
        open_file_dialog(self, "Choose the job's input", INPUT_FILTERS, lambda path, _f: self.choose(path))

    def browse_folder(self) -> None:
        open_folder_dialog(self, "Choose a folder: an item for each file in it", self.choose)

    def browse_schema(self) -> None:
        open_file_dialog(self, "Choose a JSON Schema", SCHEMA_FILTERS,
                         lambda path, _f: self.schema_file_chosen.emit(path))

    def set_schema_text(self, text: str) -> None:
        """A schema file's text, read by the controller: it replaces what the box held."""
        self.schema_edit.setPlainText(text)

    def choose(self, path: str) -> None:
        self.path_edit.setText(path)
        self.file_chosen.emit(path)

    def offer_tools(self, servers: tuple[ServerConfig, ...], web: dict, max_rounds: int, timeout_s: float) -> None:
        """The window's MCP servers and its web tools' settings, each a line to check (none
        checked: the job calls no tool); max_rounds, timeout_s: the window's tool settings."""
        self._servers, self._web = {s.name: s for s in servers}, web
        self._tool_limits = {"max_rounds": max_rounds, "timeout_s": timeout_s}
        self.tools_list.blockSignals(True)
        self.tools_list.clear()
        for name in [*self._servers, WEB_TOOLS]:
            line = QListWidgetItem(name, self.tools_list)
            line.setFlags(line.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            line.setCheckState(Qt.CheckState.Unchecked)
        self.tools_list.blockSignals(False)

    def chosen_tools(self) -> JobTools | None:
        checked = [self.tools_list.item(i).text() for i in range(self.tools_list.count())
                   if self.tools_list.item(i).checkState() == Qt.CheckState.Checked]
        servers = [self._servers[name] for name in checked if name in self._servers]
        web = self._web if WEB_TOOLS in checked else None
        if not servers and web is None:
            return None
        choice = "required" if self.tools_required.isChecked() else "auto"
        return JobTools.of(servers, web=web, choice=choice, **self._tool_limits)

    def form(self) -> JobForm:
        return JobForm(self.template_edit.toPlainText(), self.max_tokens.value(), self.system_edit.text().strip(),
                       self.schema_edit.toPlainText(), self.chosen_tools())

    def show_preview(self, shown: Preview) -> None:
        self.preview_box.setPlainText(shown.text())
        self.start_button.setEnabled(shown.ok)

    def show_problem(self, text: str) -> None:
        """The input cannot be read (missing, too big, not CSV/JSONL): said, and no Start."""
        self.preview_box.setPlainText(text)
        self.start_button.setEnabled(False)

    def _start(self) -> None:
        if self.start_button.isEnabled():
            self.start_requested.emit(self.path_edit.text().strip(), self.form())
