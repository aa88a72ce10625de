"""Edit presets: a name, a system prompt (shared KV prefix of every tab that uses it) and
a default temperature."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
)

from ui.widgets.settings.chat_settings import chat_field, setting_spin

TEMPERATURE = chat_field("temperature")


class PresetEditor(QDialog):
    save_requested = Signal(object, str, str, dict)  # id or None, name, system prompt, sampling
    delete_requested = Signal(int)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Presets")
        self.resize(720, 440)
        self.list = QListWidget()
        self.name = QLineEdit()
        self.prompt = QPlainTextEdit()
        self.prompt.setPlaceholderText("System prompt shared by every chat that uses this preset")
        self.temperature = setting_spin(TEMPERATURE)
        self.temperature.setValue(TEMPERATURE.default)
        self.new_button = QPushButton("New")
        self.save_button = QPushButton("Save")
        self.delete_button = QPushButton("Delete")
        close = QPushButton("Close")
        form = QFormLayout()
        form.addRow("Name", self.name)
        form.addRow("System prompt", self.prompt)
        form.addRow("Temperature", self.temperature)
        buttons = QHBoxLayout()
        for b in (self.new_button, self.save_button, self.delete_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(close)
        right = QVBoxLayout()
        right.addLayout(form)
        right.addLayout(buttons)
        layout = QHBoxLayout(self)
        layout.addWidget(self.list, 1)
        layout.addLayout(right, 2)
        self._presets: dict[int, object] = {}
        self.list.currentItemChanged.connect(self._show_current)
        self.new_button.clicked.connect(self._new)
        self.save_button.clicked.connect(self._save)
        self.delete_button.clicked.connect(self._delete)
        close.clicked.connect(self.accept)

    def set_presets(self, presets: list) -> None:
        """PresetRecords from storage (via the controller)."""
        current = self.current_id()
        self._presets = {p.id: p for p in presets}
        self.list.clear()
        for p in presets:
            item = QListWidgetItem(p.name)
            item.setData(Qt.ItemDataRole.UserRole, p.id)
            self.list.addItem(item)
            if p.id == current:
                self.list.setCurrentItem(item)

    def current_id(self) -> int | None:
        item = self.list.currentItem()
        return None if item is None else int(item.data(Qt.ItemDataRole.UserRole))

    def _show_current(self, *_args) -> None:
        preset = self._presets.get(self.current_id())
        self.name.setText(preset.name if preset else "")
        self.prompt.setPlainText(preset.system_prompt if preset else "")
        self.temperature.setValue(float((preset.sampling if preset else {}).get("temperature", TEMPERATURE.default)))

    def _new(self) -> None:
        self.list.setCurrentItem(None)
        self.name.clear()
        self.prompt.clear()
        self.name.setFocus()

    def _save(self) -> None:
        name = self.name.text().strip()
        if name:
            sampling = {"temperature": round(self.temperature.value(), 2)}
            self.save_requested.emit(self.current_id(), name, self.prompt.toPlainText(), sampling)

    def _delete(self) -> None:
        preset_id = self.current_id()
        if preset_id is not None:
            self.delete_requested.emit(preset_id)
