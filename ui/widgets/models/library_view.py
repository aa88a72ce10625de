"""The Library tab: the models installed (name, size on disk, where from, last used), Load,
Delete (asked first, in a box opened with open()), and each model's own defaults: context,
GPU layers, threads, KV cache type, speculative decoding (and its draft model), a chat
template override. Widgets only: the controller reads and writes the library on the
storage thread."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ui.widgets.common.file_dialogs import open_file_dialog
from ui.widgets.models.model_sizes import format_bytes, when_text

if TYPE_CHECKING:
    from app.models.library import LibraryEntry

COLUMNS = ("Name", "Size", "Source", "Last used")
NAME, SIZE, SOURCE, USED = range(len(COLUMNS))
APP_DEFAULT = "App default"
KV_TYPE_CHOICES = ((APP_DEFAULT, None), ("f16", "f16"), ("q8_0 (half the memory)", "q8_0"),
                   ("q4_0 (a quarter of the memory)", "q4_0"))
SPECULATIVE_CHOICES = ((APP_DEFAULT, None), ("Off", "off"), ("Prompt lookup", "lookup"),
                       ("Draft model", "draft"))
EMPTY_NOTE = "No models installed yet: find one in Discover."


def source_text(entry: LibraryEntry) -> str:
    if entry.source == "hub" and entry.hub_repo:
        return f"Hub: {entry.hub_repo}"
    return {"catalog": "Catalog", "local": "Local file"}.get(entry.source, entry.source)


def _combo(choices: Sequence[tuple[str, str | None]] = ()) -> QComboBox:
    """A choice box as wide as its longest entry (a model's file name included), and no
    narrower than the others in the form."""
    box = QComboBox()
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
    box.setMinimumWidth(240)
    for label, value in choices:
        box.addItem(label, value)
    return box


def _optional_spin(low: int, high: int, step: int = 1) -> QSpinBox:
    """A spin box whose lowest value means "not set": the app's own setting applies."""
    spin = QSpinBox()
    spin.setRange(low, high)
    spin.setSingleStep(step)
    spin.setSpecialValueText(APP_DEFAULT)
    spin.setMinimumWidth(160)
    return spin


class LibraryView(QWidget):
    load_requested = Signal(str)  # a model file's path
    delete_requested = Signal(str)  # a model's name, once the user said yes
    defaults_saved = Signal(str, dict)  # a model's name, ModelDefaults' fields

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.entries: dict[str, LibraryEntry] = {}
        self.delete_box: QMessageBox | None = None
        self.list = QTreeWidget()
        self.list.setHeaderLabels(COLUMNS)
        self.list.setRootIsDecorated(False)
        self.list.setUniformRowHeights(True)
        self.list.setAlternatingRowColors(True)
        header = self.list.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(NAME, QHeaderView.ResizeMode.Stretch)
        for column in (SIZE, SOURCE, USED):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.load_button = QPushButton("Load")
        self.delete_button = QPushButton("Delete…")
        self.message = QLabel()  # one line: what went wrong, or what was done
        self.message.setWordWrap(True)
        self._defaults_editor()
        self._layout()
        self.list.currentItemChanged.connect(lambda _item, _prev: self._selection_changed())
        self.list.itemDoubleClicked.connect(lambda _item, _col: self._load_clicked())
        self.load_button.clicked.connect(self._load_clicked)
        self.delete_button.clicked.connect(self.ask_delete)
        self.save_button.clicked.connect(self._save_clicked)
        self._selection_changed()

    def _defaults_editor(self) -> None:
        self.n_ctx = _optional_spin(0, 1_048_576, 1024)
        self.n_gpu_layers = _optional_spin(-1, 999)
        self.n_threads = _optional_spin(0, 512)
        self.kv_type = _combo(KV_TYPE_CHOICES)
        self.kv_type.setToolTip("The KV cache's element type: a quantized cache fits more chats, "
                                "with slight changes to the output")
        self.speculative = _combo(SPECULATIVE_CHOICES)
        self.speculative.setToolTip("Draft tokens verified in the same batch: the same text, faster when "
                                    "replies copy their prompt (lookup) or a small model guesses them (draft)")
        self.draft_model = _combo()  # the other installed models, by file
        self.draft_model.setToolTip("A smaller model with this model's vocabulary")
        self.speculative.currentIndexChanged.connect(lambda _i: self._draft_choice_changed())
        # Its vision projector (an mmproj GGUF): with one the model sees the images in chats.
        self.mmproj = QLineEdit()
        self.mmproj.setObjectName("mmprojPath")
        self.mmproj.setAccessibleName("Vision projector")
        self.mmproj.setPlaceholderText("none: the model sees no images")
        self.mmproj.setToolTip("A vision projector (mmproj GGUF) for this model: chats then show it their images")
        self.mmproj_button = QPushButton("Choose…")
        self.mmproj_button.setAccessibleName("Choose a vision projector")
        self.mmproj_button.clicked.connect(self._choose_mmproj)
        self.mmproj_dialog: QFileDialog | None = None  # the one open, if any
        self.chat_template = QPlainTextEdit()
        self.chat_template.setPlaceholderText("The model's own template (from its GGUF file)")
        self.chat_template.setFixedHeight(72)
        self.chat_template.setMinimumWidth(520)
        self.save_button = QPushButton("Save defaults")
        self.defaults_box = QGroupBox("Defaults when this model loads")
        form = QFormLayout(self.defaults_box)
        form.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.FieldsStayAtSizeHint)  # the spin boxes stay small
        form.addRow("Context (tokens):", self.n_ctx)
        form.addRow("GPU layers:", self.n_gpu_layers)
        form.addRow("Threads:", self.n_threads)
        form.addRow("KV cache:", self.kv_type)
        form.addRow("Speculative decoding:", self.speculative)
        form.addRow("Draft model:", self.draft_model)
        projector = QHBoxLayout()
        projector.addWidget(self.mmproj, 1)
        projector.addWidget(self.mmproj_button)
        form.addRow("Vision projector:", projector)
        form.addRow("Chat template:", self.chat_template)
        save_row = QHBoxLayout()
        save_row.addStretch(1)
        save_row.addWidget(self.save_button)
        form.addRow(save_row)

    def _layout(self) -> None:
        buttons = QHBoxLayout()
        buttons.addWidget(self.message, 1)
        buttons.addWidget(self.load_button)
        buttons.addWidget(self.delete_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.list, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.defaults_box)

    # ----- what the controller sets ---------------------------------------------------------

    def set_entries(self, entries: Sequence[LibraryEntry], loaded: set[str] = frozenset()) -> None:
        """The library's models; loaded: paths an engine runs on (marked, and not deletable).
        A model whose file is gone stays listed as missing, until it is deleted (forgotten)."""
        current = self.selected_name()
        self.entries = {e.name: e for e in entries}
        self.list.blockSignals(True)
        self.list.clear()
        for entry in self.entries.values():
            mark = "  (loaded)" if str(entry.path) in loaded else "" if entry.installed else "  (missing)"
            size = format_bytes(entry.size_bytes) if entry.installed else "—"
            item = QTreeWidgetItem([entry.name + mark, size, source_text(entry), when_text(entry.last_used)])
            if not entry.installed:
                item.setForeground(NAME, self.palette().brush(QPalette.ColorGroup.Disabled, QPalette.ColorRole.Text))
            item.setData(NAME, Qt.ItemDataRole.UserRole, entry.name)
            item.setTextAlignment(SIZE, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            item.setToolTip(NAME, str(entry.path))
            self.list.addTopLevelItem(item)
        self.list.blockSignals(False)
        if not self.entries:
            self.set_message(EMPTY_NOTE)
        elif self.message.text() == EMPTY_NOTE:
            self.set_message("")
        if current in self.entries:
            self.select(current)
        else:
            self._selection_changed()

    def set_message(self, text: str, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setForegroundRole(QPalette.ColorRole.WindowText if error
                                       else QPalette.ColorRole.PlaceholderText)
        self.message.setStyleSheet("color: #e5534b;" if error else "")

    def names(self) -> list[str]:
        return list(self.entries)

    def select(self, name: str) -> None:
        for i in range(self.list.topLevelItemCount()):
            item = self.list.topLevelItem(i)
            if item.data(NAME, Qt.ItemDataRole.UserRole) == name:
                self.list.setCurrentItem(item)
                return

    def selected_name(self) -> str | None:
        item = self.list.currentItem()
        return item.data(NAME, Qt.ItemDataRole.UserRole) if item is not None else None

    def selected(self) -> LibraryEntry | None:
        name = self.selected_name()
        return self.entries.get(name) if name else None

    # ----- the user's requests ----------------------------------------------------------------

    def _selection_changed(self) -> None:
        entry = self.selected()
        for widget in (self.delete_button, self.defaults_box):
            widget.setEnabled(entry is not None)
        self.load_button.setEnabled(entry is not None and entry.installed)
        self.defaults_box.setTitle(f"Defaults when {entry.name} loads" if entry else "Defaults when a model loads")
        d = entry.defaults if entry is not None else None
        self.n_ctx.setValue((d.n_ctx or 0) if d else 0)
        self.n_gpu_layers.setValue(d.n_gpu_layers if d and d.n_gpu_layers is not None else -1)
        self.n_threads.setValue((d.n_threads or 0) if d else 0)
        self.kv_type.setCurrentIndex(max(0, self.kv_type.findData(d.kv_type if d else None)))
        self._fill_draft_models(entry, d.draft_model if d else None)
        self.speculative.setCurrentIndex(max(0, self.speculative.findData(d.speculative if d else None)))
        self._draft_choice_changed()
        self.chat_template.setPlainText((d.chat_template or "") if d else "")
        self.mmproj.setText((d.mmproj or "") if d else "")

    def _fill_draft_models(self, entry: LibraryEntry | None, chosen: str | None) -> None:
        """The installed models other than entry, and the stored draft model's file even if
        it is not one of them (a file chosen on the command line)."""
        self.draft_model.clear()
        for other in self.entries.values():
            if other.installed and (entry is None or other.name != entry.name):
                self.draft_model.addItem(other.name, str(other.path))
        if chosen and self.draft_model.findData(chosen) < 0:
            self.draft_model.addItem(chosen, chosen)
        self.draft_model.setCurrentIndex(max(0, self.draft_model.findData(chosen)))

    def _choose_mmproj(self) -> None:
        """A projector file, in a dialog opened with open() (no nested event loop)."""
        self.mmproj_dialog = open_file_dialog(self, "Vision projector", "Projectors (*.gguf);;All files (*)",
                                              lambda path, _filter: self.mmproj.setText(path))
        self.mmproj_dialog.finished.connect(lambda _result: setattr(self, "mmproj_dialog", None))

    def _draft_choice_changed(self) -> None:
        self.draft_model.setEnabled(self.speculative.currentData() == "draft" and self.draft_model.count() > 0)

    def _load_clicked(self) -> None:
        entry = self.selected()
        if entry is not None:
            self.load_requested.emit(str(entry.path))

    def ask_delete(self) -> QMessageBox | None:
        """Asks first, in a window-modal box opened with open() (no nested event loop)."""
        entry = self.selected()
        if entry is None:
            return None
        size = format_bytes(entry.size_bytes)
        what = (f"Delete {entry.name} ({size})?\nIts file is removed from {entry.path.parent}." if entry.installed
                else f"Forget {entry.name}? Its file is no longer at {entry.path}.")
        box = QMessageBox(QMessageBox.Icon.Question, "Delete model", what,
                          QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, self)
        box.setDefaultButton(QMessageBox.StandardButton.No)
        name = entry.name
        box.buttonClicked.connect(
            lambda button: box.standardButton(button) == QMessageBox.StandardButton.Yes
            and self.delete_requested.emit(name))
        box.finished.connect(box.deleteLater)
        self.delete_box = box
        box.open()
        return box

    def defaults_values(self) -> dict:
        """The editor's fields as ModelDefaults' keyword arguments (None: not set)."""
        template = self.chat_template.toPlainText().strip()
        return {
            "n_ctx": self.n_ctx.value() or None,
            "n_gpu_layers": None if self.n_gpu_layers.value() < 0 else self.n_gpu_layers.value(),
            "n_threads": self.n_threads.value() or None,
            "chat_template": template or None,
            "kv_type": self.kv_type.currentData(),
            "speculative": self.speculative.currentData(),
            # Kept with any mode (chosen again later), but only where "draft" could use it.
            "draft_model": self.draft_model.currentData() if self.speculative.currentData() == "draft" else
            self._stored_draft_model(),
            "mmproj": self.mmproj.text().strip() or None,
        }

    def _stored_draft_model(self) -> str | None:
        entry = self.selected()
        return entry.defaults.draft_model if entry is not None else None

    def _save_clicked(self) -> None:
        name = self.selected_name()
        if name is not None:
            self.defaults_saved.emit(name, self.defaults_values())
