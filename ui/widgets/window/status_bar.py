"""The main window's status bar: the engine's state, a model loading, a Hub download, the
HTTP server's address, and "Deleted … · Undo" for a while after a chat or comparison is
deleted. The controllers' passing messages (showMessage) go here too."""

from __future__ import annotations

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QLabel, QProgressBar, QPushButton, QStatusBar, QWidget

from ui.widgets.models.download_status import DownloadStatus

UNDO_MS = 10_000


class WindowStatusBar(QStatusBar):
    undo_delete_requested = Signal(int)  # a chat's id
    undo_comparison_delete_requested = Signal(int)  # a comparison's id

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.engine_label = QLabel("engine: starting…")
        self.load_progress = QProgressBar()
        self.load_progress.setRange(0, 100)
        self.load_progress.setMaximumWidth(160)
        self.load_progress.hide()
        self.download_status = DownloadStatus()  # a Hub download going on; a click shows it
        self.server_label = QLabel("")
        self.server_label.setToolTip("The OpenAI-compatible server (File → Serve over HTTP)")
        self.server_label.hide()
        for part in (self.load_progress, self.download_status, self.engine_label, self.server_label):
            self.addPermanentWidget(part)
        # A label, not showMessage(): a temporary message hides the status bar's widgets,
        # and so covered its own Undo button.
        self.undo_label = QLabel("")
        self.undo_button = QPushButton("Undo")
        for offer in (self.undo_label, self.undo_button):
            offer.hide()
            self.addWidget(offer)
        self.undo_button.clicked.connect(self._undo_clicked)
        self._undo: tuple[bool, int] | None = None  # (is a comparison, id)

    def set_engine_status(self, text: str) -> None:
        self.engine_label.setText(text)

    def set_load_progress(self, fraction: float | None) -> None:
        """Model loading progress; None hides the bar."""
        if fraction is None or fraction >= 1.0:
            self.load_progress.hide()
        else:
            self.load_progress.show()
            self.load_progress.setValue(int(fraction * 100))

    def set_server_url(self, url: str | None) -> None:
        """The server's address, or nothing when it is off."""
        self.server_label.setText(f"API: {url}" if url else "")
        self.server_label.setVisible(url is not None)

    # ----- undo a deletion -------------------------------------------------------------------

    def offer_undo_delete(self, ident: int, title: str, comparison: bool = False) -> None:
        """'Deleted' with an Undo button, for a while."""
        self._undo = (comparison, ident)
        self.undo_label.setText(f"Deleted “{title or 'New chat'}”")
        self.undo_label.show()
        self.undo_button.show()
        # With the bar as the timer's context: a window closed meanwhile drops the call (it
        # hid a deleted label, an error in whatever ran next: a clean-clone run's next test).
        QTimer.singleShot(UNDO_MS, self, lambda: self.hide_undo(ident))

    def _undo_clicked(self) -> None:
        if self._undo is not None:
            comparison, ident = self._undo
            (self.undo_comparison_delete_requested if comparison else self.undo_delete_requested).emit(ident)
        self.hide_undo()

    def hide_undo(self, only: int | None = None) -> None:
        """Hide the offer; with `only`, just if it is still the offer for that deletion."""
        if only is not None and (self._undo is None or self._undo[1] != only):
            return
        self._undo = None
        self.undo_label.hide()
        self.undo_button.hide()
