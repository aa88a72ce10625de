"""The files waiting to go with the next message, one chip each, above the composer's text.

A chip is reading its file (a progress bar and ×, which cancels), ready (pages, size,
characters; × removes it) or failed (the reason in red; it is never sent). The reading
itself is not done here: the tray asks for it (extraction_requested) and whoever runs it
reports back through the chip's set_progress / set_ready / set_failed."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from enum import Enum
from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QLayout,
    QLayoutItem,
    QProgressBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from storage import NewDocument
from ui.widgets.document_labels import document_details

CHIP_WIDTH = 230


class ChipState(str, Enum):
    EXTRACTING = "extracting"
    READY = "ready"
    FAILED = "failed"


def file_paths_of(mime: QMimeData) -> list[Path]:
    """The local files a drop or a paste carries (file URLs); text and web links are not files."""
    if not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile() and url.toLocalFile()]


class AttachmentChip(QFrame):
    close_clicked = Signal()
    finished = Signal()  # read, or failed

    def __init__(self, path: Path, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentChip")
        self.path = path
        self.cancel = threading.Event()  # set by ×: the extraction stops at its next check
        self.document: NewDocument | None = None
        self.error = ""
        self.state = ChipState.EXTRACTING
        self.setFixedWidth(CHIP_WIDTH)
        self.name_label = QLabel(path.name)
        self.name_label.setObjectName("chipName")
        self.name_label.setToolTip(str(path))
        self.details = QLabel("reading…")
        self.details.setObjectName("chipDetails")
        self.progress = QProgressBar()
        self.progress.setObjectName("chipProgress")
        self.progress.setRange(0, 0)  # busy until the first fraction comes
        self.progress.setTextVisible(False)
        self.progress.setFixedHeight(4)
        self.close_button = QToolButton()
        self.close_button.setObjectName("chipClose")
        self.close_button.setText("×")
        self.close_button.setCursor(Qt.CursorShape.PointingHandCursor)
        self.close_button.setAutoRaise(True)
        self.close_button.clicked.connect(self.close_clicked)
        self._layout()
        self._show_state()

    def _layout(self) -> None:
        text = QVBoxLayout()
        text.setSpacing(1)
        text.addWidget(self.name_label)
        text.addWidget(self.details)
        text.addWidget(self.progress)
        row = QHBoxLayout(self)
        row.setContentsMargins(8, 4, 2, 4)
        row.addLayout(text, 1)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide_name()

    def _elide_name(self) -> None:
        room = max(20, self.name_label.width())
        self.name_label.setText(self.name_label.fontMetrics().elidedText(
            self.path.name, Qt.TextElideMode.ElideMiddle, room))

    def set_progress(self, fraction: float) -> None:
        if self.state is ChipState.EXTRACTING:
            self.progress.setRange(0, 100)
            self.progress.setValue(round(100 * min(1.0, max(0.0, fraction))))
            self.details.setText(f"reading… {self.progress.value()}%")

    def set_ready(self, document: NewDocument, fit: str = "") -> None:
        """fit: its tokens and whether it goes whole into the model's context, when known."""
        self.document, self.state = document, ChipState.READY
        details = document_details(document.pages, document.size_bytes, len(document.text))
        self.details.setText(f"{details}\n{fit}" if fit else details)
        self._show_state()
        self.finished.emit()

    def set_failed(self, message: str) -> None:
        self.error, self.state = message, ChipState.FAILED
        self.details.setText(message)
        self.details.setToolTip(message)
        self._show_state()
        self.finished.emit()

    def _show_state(self) -> None:
        extracting = self.state is ChipState.EXTRACTING
        self.progress.setVisible(extracting)
        self.close_button.setToolTip("Stop reading this file" if extracting else "Remove this file")
        self.setProperty("state", self.state.value)  # the stylesheet's colours (ui/theme.py)
        self.details.setProperty("failed", self.state is ChipState.FAILED)
        for widget in (self, self.details):
            widget.style().unpolish(widget)
            widget.style().polish(widget)


class FlowLayout(QLayout):
    """Left to right, wrapping onto new lines: chips never widen the composer."""

    def __init__(self, parent: QWidget | None = None, spacing: int = 6) -> None:
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self.setSpacing(spacing)
        self.setContentsMargins(0, 0, 0, 0)

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._place(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._place(rect, move=True)

    def sizeHint(self) -> QSize:
        return self.minimumSize()

    def minimumSize(self) -> QSize:
        size = QSize()
        for item in self._items:
            size = size.expandedTo(item.minimumSize())
        return size

    def _place(self, rect: QRect, move: bool) -> int:
        x, y, line = rect.x(), rect.y(), 0
        for item in self._items:
            hint = item.sizeHint()
            if x + hint.width() > rect.right() + 1 and line > 0:
                x, y, line = rect.x(), y + line + self.spacing(), 0
            if move:
                item.setGeometry(QRect(QPoint(x, y), hint))
            x += hint.width() + self.spacing()
            line = max(line, hint.height())
        return y + line - rect.y()


class AttachmentTray(QWidget):
    extraction_requested = Signal(object)  # an AttachmentChip whose file is to be read
    changed = Signal()  # a chip came, finished or went: Send may be allowed now, or not

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentTray")
        self._chips: list[AttachmentChip] = []
        self._flow = FlowLayout(self)
        self.hide()

    def chips(self) -> list[AttachmentChip]:
        return list(self._chips)

    def add_files(self, paths: Iterable[Path]) -> list[AttachmentChip]:
        added = []
        for path in paths:
            chip = self._add(AttachmentChip(Path(path)))
            added.append(chip)
            self.extraction_requested.emit(chip)
        return added

    def add_documents(self, documents: Iterable[NewDocument]) -> None:
        """Documents already read (a message that could not be stored, given back)."""
        for document in documents:
            self._add(AttachmentChip(Path(document.name))).set_ready(document)

    def _add(self, chip: AttachmentChip) -> AttachmentChip:
        chip.close_clicked.connect(lambda c=chip: self.remove(c))
        chip.finished.connect(self.changed)
        self._chips.append(chip)
        self._flow.addWidget(chip)
        self.show()
        self.changed.emit()
        return chip

    def remove(self, chip: AttachmentChip) -> None:
        """× on a chip: a file being read stops (its extraction sees the event set)."""
        chip.cancel.set()
        if chip in self._chips:
            self._chips.remove(chip)
            chip.hide()
            chip.deleteLater()
        self.setVisible(bool(self._chips))
        self.changed.emit()

    def clear(self) -> None:
        for chip in self.chips():
            self.remove(chip)

    def extracting(self) -> bool:
        return any(c.state is ChipState.EXTRACTING for c in self._chips)

    def ready_documents(self) -> tuple[NewDocument, ...]:
        """What goes with the message: the files read; a failed one never does."""
        return tuple(c.document for c in self._chips if c.state is ChipState.READY and c.document is not None)
