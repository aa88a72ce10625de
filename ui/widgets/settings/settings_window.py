"""Settings, in two tabs: Chats, the defaults of every chat (sampling, the reply's length,
what a chat longer than the context keeps; a preset's and a chat's own settings go on top
of them), and Tools, the MCP servers and the limits of a chat's tool calls (tools_settings).
Save keeps both pages' fields; the servers change at once on their page."""

from __future__ import annotations

from PySide6.QtCore import QSize, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from app.chats.defaults import ChatDefaults
from app.chats.overflow import LABELS as OVERFLOW_LABELS
from ui.widgets.settings.chat_settings import SettingSpins
from ui.widgets.tools.tools_settings import ToolsPage

SCREEN_SHARE = 0.9  # of the screen's free area at most: Qt's own first size is 2/3 of it


class SettingsWindow(QDialog):
    saved = Signal(object)  # the ChatDefaults chosen
    limits_saved = Signal(object)  # the Tools page's limits, by ToolSettings' field names

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Settings")
        self.setObjectName("settings_window")
        self.tabs = QTabWidget()
        self.tabs.setObjectName("settingsTabs")
        self.chats = QWidget()
        self.tools = ToolsPage()
        self.tabs.addTab(self.chats, "&Chats")
        self.tabs.addTab(self.tools, "&Tools")
        form = QFormLayout(self.chats)
        form.addRow(QLabel("Defaults for every chat; a preset's or a chat's own settings win."))
        self.settings = SettingSpins(form)
        self.spins = self.settings.spins
        self.reply_length = self.settings.reply_length
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
        restore.clicked.connect(self._restore_defaults)
        box = QVBoxLayout(self)
        box.addWidget(self.tabs)
        box.addWidget(buttons)
        self.resize(self._opening_size())

    def _opening_size(self) -> QSize:
        """What its pages ask for (the Tools page is wide), on a small screen what fits."""
        area = self.screen().availableGeometry().size() * SCREEN_SHARE
        return self.sizeHint().boundedTo(area).expandedTo(self.minimumSizeHint())

    def show_defaults(self, defaults: ChatDefaults) -> None:
        self.settings.set_values(defaults.values())
        self.overflow.setCurrentIndex(max(0, self.overflow.findData(defaults.overflow)))

    def chosen(self) -> ChatDefaults:
        return ChatDefaults.from_setting({**self.settings.values(), "overflow": self.overflow.currentData()})

    def _restore_defaults(self) -> None:
        """Both pages' fields (nothing is kept until Save); the servers stay as they are."""
        self.show_defaults(ChatDefaults())
        self.tools.restore_limits()

    def _save(self) -> None:
        self.saved.emit(self.chosen())
        self.limits_saved.emit(self.tools.chosen_limits())
        self.accept()
