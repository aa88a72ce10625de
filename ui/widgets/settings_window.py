"""Settings: the defaults of every chat (sampling, the reply's length, what a chat longer
than the context keeps). A preset's and a chat's own settings go on top of them."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFormLayout, QLabel, QSpinBox

from app.chats.defaults import ChatDefaults
from app.chats.overflow import LABELS as OVERFLOW_LABELS
from ui.widgets.chat_settings import FIELDS, sampling_spin
from ui.widgets.reply_length import ReplyLengthSpin


class SettingsWindow(QDialog):
    saved = Signal(object)  # the ChatDefaults chosen

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settings_window")
        form = QFormLayout(self)
        form.addRow(QLabel("Defaults for every chat; a preset's or a chat's own settings win."))
        self.spins: dict[str, QDoubleSpinBox] = {}
        for name, (label, *_limits) in FIELDS.items():
            self.spins[name] = sampling_spin(name)
            form.addRow(label, self.spins[name])
        self.top_k = QSpinBox()
        self.top_k.setRange(0, 1000)
        form.addRow("Top-k", self.top_k)
        self.reply_length = ReplyLengthSpin()
        form.addRow("Max tokens", self.reply_length)
        self.overflow = QComboBox()
        for key, label in OVERFLOW_LABELS.items():
            self.overflow.addItem(label, key)
        self.overflow.setToolTip("What the model still sees of a chat that has outgrown its context")
        form.addRow("Chat longer than the context", self.overflow)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel
                                   | QDialogButtonBox.StandardButton.RestoreDefaults)
        buttons.accepted.connect(self._save)
        buttons.rejected.connect(self.reject)
        restore = buttons.button(QDialogButtonBox.StandardButton.RestoreDefaults)
        restore.clicked.connect(lambda: self.show_defaults(ChatDefaults()))
        form.addRow(buttons)

    def show_defaults(self, defaults: ChatDefaults) -> None:
        for name, spin in self.spins.items():
            spin.setValue(float(getattr(defaults, name)))
        self.top_k.setValue(defaults.top_k)
        self.reply_length.set_tokens(defaults.max_tokens)
        self.overflow.setCurrentIndex(max(0, self.overflow.findData(defaults.overflow)))

    def chosen(self) -> ChatDefaults:
        values = {name: round(spin.value(), 3) for name, spin in self.spins.items()}
        return ChatDefaults.from_setting({**values, "top_k": self.top_k.value(),
                                          "max_tokens": self.reply_length.tokens(),
                                          "overflow": self.overflow.currentData()})

    def _save(self) -> None:
        self.saved.emit(self.chosen())
        self.accept()
