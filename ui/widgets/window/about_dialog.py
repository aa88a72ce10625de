"""Help → About Chorus: what this build is made of, and where its data lives."""

from __future__ import annotations

from PySide6.QtCore import Qt, qVersion
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QFormLayout, QLabel, QVBoxLayout, QWidget

from app.about import AboutInfo
from ui.icon import app_icon

ICON_PX = 64


class AboutDialog(QDialog):
    def __init__(self, info: AboutInfo, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About Chorus")
        self.info = info
        title = QLabel(f"<h2>Chorus {info.chorus}</h2>Many local LLM chats at once, on one batched llama.cpp engine.")
        title.setWordWrap(True)
        icon = QLabel()
        icon.setPixmap(app_icon().pixmap(ICON_PX, ICON_PX))
        form = QFormLayout()
        self.values: dict[str, QLabel] = {}
        for label, value in info.rows(qt_version=qVersion()):
            shown = QLabel(value)
            shown.setWordWrap(True)
            shown.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            form.addRow(f"{label}:", shown)
            self.values[label] = shown
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        box = QVBoxLayout(self)
        box.addWidget(icon, 0, Qt.AlignmentFlag.AlignHCenter)
        box.addWidget(title)
        box.addLayout(form)
        box.addWidget(buttons)
        self.setMinimumWidth(520)
