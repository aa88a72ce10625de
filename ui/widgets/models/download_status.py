"""The status bar's small sign of a Hub download running while the Models window may be
closed: the file, how far, a thin bar. A click brings the Models window back."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QMouseEvent, QPalette
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QWidget

NAME_CHARS = 32  # a long file name is elided here; whole in the tooltip


class DownloadStatus(QWidget):
    clicked = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("downloadStatus")
        self.setCursor(Qt.CursorShape.PointingHandCursor)
        self.label = QLabel()
        self.label.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self.bar = QProgressBar()
        self.bar.setRange(0, 1000)
        self.bar.setTextVisible(False)
        self.bar.setFixedSize(100, 8)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.setSpacing(6)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        self.hide()

    def set_progress(self, filename: str, fraction: float | None, detail: str = "") -> None:
        """A download under way: fraction None while its size is not known yet."""
        name = filename if len(filename) <= NAME_CHARS else filename[: NAME_CHARS - 1] + "…"
        percent = f" {fraction * 100:.0f}%" if fraction is not None else ""
        self.label.setText(f"Downloading {name}{percent}")
        self.setToolTip(f"Downloading {filename}{(' · ' + detail) if detail else ''}\n"
                        "Click to open the Models window")
        if fraction is None:
            self.bar.setRange(0, 0)  # busy: how far is not known
        else:
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(fraction * 1000))
        self.show()

    def clear(self) -> None:
        self.hide()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802 (Qt's name)
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mousePressEvent(event)
