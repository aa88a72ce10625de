"""The Models window: Discover (search the Hugging Face Hub, a repository's files and
whether they fit, download) and Library (the models installed). A separate, non-modal
window: shown with show() and hidden on close, so a download goes on behind it and the
window comes back as it was. Widgets only: ui/controllers/models_window.py runs it."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut, QShowEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from ui.widgets.hub_files import HubFiles
from ui.widgets.hub_results import HubResults
from ui.widgets.library_view import LibraryView

ERROR_COLOUR = "#e5534b"


class ModelsWindow(QWidget):
    opened = Signal()  # each time it is shown
    closed = Signal()
    retry_requested = Signal()  # ask the Hub again (after it could not be reached)

    def __init__(self, n_ctx: int = 8192, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)  # its own window, above the main one
        self.setWindowTitle("Models")
        self.resize(1120, 660)
        self.results = HubResults()
        self.files = HubFiles(n_ctx)
        self.library = LibraryView()
        self.discover_message = QLabel()  # one line: offline, unreachable, gated, integrity
        self.discover_message.setWordWrap(True)
        self.discover_message.hide()
        self.busy = QProgressBar()  # while the Hub is asked: a busy bar, how long unknown
        self.busy.setRange(0, 0)
        self.busy.setTextVisible(False)
        self.busy.setFixedSize(80, 8)
        self.busy.hide()
        self.retry_button = QPushButton("Retry")
        self.retry_button.clicked.connect(self.retry_requested)
        self.retry_button.hide()
        self.tabs = QTabWidget()
        self.tabs.addTab(self._discover_page(), "Discover")
        self.tabs.addTab(self.library, "Library")
        layout = QVBoxLayout(self)
        layout.addWidget(self.tabs)
        QShortcut(QKeySequence(QKeySequence.StandardKey.Close), self, self.close)
        QShortcut(QKeySequence("Escape"), self, self.close)

    def _discover_page(self) -> QWidget:
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.results)
        split.addWidget(self.files)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setSizes([520, 600])  # repository ids are long; file names too
        split.setChildrenCollapsible(False)
        page = QWidget()
        box = QVBoxLayout(page)
        line = QHBoxLayout()
        line.addWidget(self.busy, 0, Qt.AlignmentFlag.AlignVCenter)
        line.addWidget(self.discover_message, 1)
        line.addWidget(self.retry_button, 0, Qt.AlignmentFlag.AlignVCenter)
        box.addLayout(line)
        box.addWidget(split, 1)
        return page

    def show_discover(self) -> None:
        self.tabs.setCurrentIndex(0)

    def show_library(self) -> None:
        self.tabs.setCurrentWidget(self.library)

    def set_discover_message(self, text: str, error: bool = True, busy: bool = False, retry: bool = False) -> None:
        """One line above the results: why the Hub can't answer (retry: with Retry, which
        asks again), or what is going on (busy: with the busy bar)."""
        self.discover_message.setText(text)
        self.discover_message.setStyleSheet(f"color: {ERROR_COLOUR};" if error and text else "")
        self.discover_message.setVisible(bool(text))
        self.busy.setVisible(busy)
        self.retry_button.setVisible(retry)

    def bring_up(self) -> None:
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        self.opened.emit()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        super().closeEvent(event)  # hidden, not deleted: a download goes on
        self.closed.emit()
