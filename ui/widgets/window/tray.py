"""The desktop notification for a reply that finished out of sight: a system tray message,
with the View menu's option that turns it on (off by default). Where there is no tray (an
offscreen or bare X session) the option is disabled and says why."""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QSystemTrayIcon, QWidget

from ui.icon import app_icon

NOTIFY_TEXT = "Notify when a background reply finishes"
NO_TRAY = "This desktop has no system tray to show notifications in"
MESSAGE_MS = 6000


class TrayNotifier(QObject):
    clicked = Signal(int)  # the conversation whose message was clicked

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.action = QAction(NOTIFY_TEXT, parent)
        self.action.setCheckable(True)
        self._tray: QSystemTrayIcon | None = None  # made on the first message: no icon until then
        self._about: int | None = None
        if not self.available():
            self.action.setEnabled(False)
            self.action.setToolTip(NO_TRAY)
            self.action.setStatusTip(NO_TRAY)

    @staticmethod
    def available() -> bool:
        return QSystemTrayIcon.isSystemTrayAvailable()

    def enabled(self) -> bool:
        return self.action.isChecked() and self.available()

    def set_enabled(self, on: bool) -> None:
        """The saved choice, shown without counting as a new one."""
        self.action.blockSignals(True)
        self.action.setChecked(on)
        self.action.blockSignals(False)

    def notify(self, conversation_id: int, title: str, text: str) -> None:
        if self._tray is None:
            self._tray = QSystemTrayIcon(app_icon(), self)
            self._tray.setToolTip("Chorus")
            self._tray.messageClicked.connect(self._message_clicked)
        self._tray.show()
        self._about = conversation_id
        self._tray.showMessage(title, text, QSystemTrayIcon.MessageIcon.Information, MESSAGE_MS)

    def _message_clicked(self) -> None:
        if self._about is not None:
            self.clicked.emit(self._about)
