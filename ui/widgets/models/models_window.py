"""The Models window: Discover (search the Hugging Face Hub, a repository's files and
whether they fit, download) and Library (the models installed). A separate, non-modal
window: shown with show() and hidden on close, so a download goes on behind it and the
window comes back as it was. Widgets only: ui/controllers/models_window/ runs it."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt, Signal
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

from ui.widgets.models.hub_files import HubFiles
from ui.widgets.models.hub_results import HubResults
from ui.widgets.models.library_view import LibraryView

ERROR_COLOUR = "#e5534b"
DEFAULT_SIZE = (1120, 660)  # repository ids and file names are long
SCREEN_SHARE = 0.9  # at most this much of the screen's free area, on a small screen
FRAME_GUESS = QSize(16, 40)  # borders and title bar, before the first showing tells them


class ModelsWindow(QWidget):
    opened = Signal()  # each time it is shown
    closed = Signal()
    retry_requested = Signal()  # ask the Hub again (after it could not be reached)

    def __init__(self, n_ctx: int = 8192, parent: QWidget | None = None) -> None:
        super().__init__(parent, Qt.WindowType.Window)  # its own window, above the main one
        self.setWindowTitle("Models")
        self.resize(*DEFAULT_SIZE)
        self._placed = False  # placed on the screen at its first showing; then where the user left it
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
        if not self._placed:
            self._place_on_screen()
        if self.isMinimized():
            self.showNormal()
        self.show()
        self.raise_()
        self.activateWindow()

    def _place_on_screen(self) -> None:
        """Over the main window, whole within the free area of its screen: the default size
        was larger than a small screen, and centring on a main window near an edge put part
        of it off-screen."""
        self._placed = True
        owner = self.parentWidget()
        screen = owner.screen() if owner is not None else self.screen()
        area = screen.availableGeometry()
        frame = self.frameGeometry().size() - self.geometry().size()  # the title bar and borders, once known
        if frame.isEmpty():  # not yet shown: the window manager's usual share
            frame = FRAME_GUESS
        least = self.minimumSizeHint()  # what its layout needs, whatever the screen
        width = max(least.width(), min(DEFAULT_SIZE[0], int(area.width() * SCREEN_SHARE) - frame.width()))
        height = max(least.height(), min(DEFAULT_SIZE[1], int(area.height() * SCREEN_SHARE) - frame.height()))
        self.resize(width, height)
        box = QRect(0, 0, width + frame.width(), height + frame.height())
        box.moveCenter(owner.frameGeometry().center() if owner is not None else area.center())
        box.moveLeft(max(area.left(), min(box.left(), area.right() + 1 - box.width())))
        box.moveTop(max(area.top(), min(box.top(), area.bottom() + 1 - box.height())))
        self.move(box.topLeft())  # move() places the frame's corner

    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        self.opened.emit()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        super().closeEvent(event)  # hidden, not deleted: a download goes on
        self.closed.emit()
