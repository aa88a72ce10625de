"""The files waiting to go with the next message, one chip each, above the composer's text.

A chip is reading its file (a progress bar and ×, which cancels), ready (pages, size,
characters; × removes it) or failed (the reason in red: nothing is sent while it is there,
the composer says so, until × removes it). An image's chip shows its thumbnail (clicked, it
opens large) and, where the chat's model has no vision projector, says that only its name
is sent. A pasted image (Ctrl+V of a screenshot) is a chip named "pasted image N.png" whose
pixels are encoded as PNG by the reader, off the GUI thread. The reading
itself is not done here: the tray asks for it (extraction_requested) and whoever runs it
reports back through the chip's set_progress / set_ready / set_failed."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from enum import Enum
from pathlib import Path

from PySide6.QtCore import QMimeData, QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QIcon, QImage, QPixmap
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
from ui.widgets.chat.document_labels import document_details, image_details
from ui.widgets.common.words import elided_at_a_word

CHIP_WIDTH = 260  # "2 pages · 1 KB · 61 characters" whole
THUMB_SIDE = 40  # an image chip's thumbnail in the composer


class ChipState(str, Enum):
    EXTRACTING = "extracting"
    READY = "ready"
    FAILED = "failed"


def file_paths_of(mime: QMimeData) -> list[Path]:
    """The local files a drop or a paste carries (file URLs); text and web links are not files."""
    if not mime.hasUrls():
        return []
    return [Path(url.toLocalFile()) for url in mime.urls() if url.isLocalFile() and url.toLocalFile()]


class ElidedLines(QLabel):
    """Lines each shown whole or ending in "…" at the label's width (never cut mid-word at
    the chip's edge), the whole text in the tooltip when one does not fit (issue 39, defect
    13)."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.whole = ""
        self.set_whole(text)

    def set_whole(self, text: str) -> None:
        self.whole = text
        self._elide()

    def minimumSizeHint(self) -> QSize:
        return QSize(0, super().minimumSizeHint().height())

    def sizeHint(self) -> QSize:
        return QSize(0, super().sizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide()

    def _elide(self) -> None:
        metrics, room = self.fontMetrics(), max(20, self.contentsRect().width())
        shown = "\n".join(elided_at_a_word(metrics, line, room) for line in self.whole.splitlines())
        if shown != self.text():
            self.setText(shown)
        self.setToolTip(self.whole if shown != self.whole else "")


class AttachmentChip(QFrame):
    close_clicked = Signal()
    finished = Signal()  # read, or failed
    thumbnail_clicked = Signal()  # an image's: show it large

    def __init__(self, path: Path, parent: QWidget | None = None, pasted: QImage | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentChip")
        self.path = path
        self.pasted = pasted  # a pasted image's pixels (no file): the reader encodes them as PNG
        self.cancel = threading.Event()  # set by ×: the extraction stops at its next check
        self.document: NewDocument | None = None
        self.error = ""
        self.state = ChipState.EXTRACTING
        self.setFixedWidth(CHIP_WIDTH)
        self.name_label = QLabel(path.name)
        self.name_label.setObjectName("chipName")
        self.name_label.setToolTip(str(path))
        self.details = ElidedLines("reading…")
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
        self.thumbnail = QToolButton()  # an image's, once read
        self.thumbnail.setObjectName("chipThumbnail")
        self.thumbnail.setIconSize(QSize(THUMB_SIDE, THUMB_SIDE))
        self.thumbnail.setFixedSize(THUMB_SIDE + 4, THUMB_SIDE + 4)
        self.thumbnail.setAutoRaise(True)
        self.thumbnail.setCursor(Qt.CursorShape.PointingHandCursor)
        self.thumbnail.setToolTip("Show the image")
        self.thumbnail.setAccessibleName(f"Show {path.name}")  # an icon only: no text to say
        self.thumbnail.clicked.connect(self.thumbnail_clicked)
        self.thumbnail.hide()
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
        row.addWidget(self.thumbnail, 0, Qt.AlignmentFlag.AlignVCenter)
        row.addLayout(text, 1)
        row.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignTop)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._elide_name()

    def _set_details(self, text: str) -> None:
        self.details.set_whole(text)

    def _elide_name(self) -> None:
        room = max(20, self.name_label.width())
        self.name_label.setText(self.name_label.fontMetrics().elidedText(
            self.path.name, Qt.TextElideMode.ElideMiddle, room))

    def set_progress(self, fraction: float) -> None:
        if self.state is ChipState.EXTRACTING:
            self.progress.setRange(0, 100)
            self.progress.setValue(round(100 * min(1.0, max(0.0, fraction))))
            self._set_details(f"reading… {self.progress.value()}%")

    @property
    def is_image(self) -> bool:
        return self.document is not None and self.document.data is not None

    def set_ready(self, document: NewDocument, fit: str = "", thumbnail: QImage | None = None) -> None:
        """fit: its tokens and whether it goes whole into the model's context, when known (an
        image: whether the model sees it). thumbnail: an image's, scaled down."""
        self.document, self.state = document, ChipState.READY
        if document.data is not None:
            details = image_details(document.mime, document.size_bytes)
        else:
            details = document_details(document.pages, document.size_bytes, len(document.text))
        if thumbnail is not None:
            self.set_thumbnail(thumbnail)
        self._set_details(f"{details}\n{fit}" if fit else details)
        self._show_state()
        self.finished.emit()

    def set_thumbnail(self, thumbnail: QImage) -> None:
        if thumbnail.isNull():
            return
        self.thumbnail.setIcon(QIcon(QPixmap.fromImage(thumbnail)))
        self.thumbnail.show()
        self.setFixedWidth(CHIP_WIDTH + THUMB_SIDE + 10)  # the text keeps a document chip's room

    def set_failed(self, message: str) -> None:
        self.error, self.state = message, ChipState.FAILED
        self._set_details(message)
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
    image_requested = Signal(object)  # an AttachmentChip whose image is to be shown large
    thumbnail_requested = Signal(object)  # an AttachmentChip given back with its image read, not its thumbnail

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachmentTray")
        self._chips: list[AttachmentChip] = []
        self._flow = FlowLayout(self)
        self._sent_from: dict[str, Path] = {}  # a sent document's sha256 -> the file it was read from
        self._pasted = 0  # images pasted into this composer: each chip's name numbers them
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

    def add_image(self, image: QImage) -> AttachmentChip:
        """An image pasted from the clipboard: a chip of its own, named for it, read (encoded as
        PNG, checked) like a file."""
        self._pasted += 1
        chip = self._add(AttachmentChip(Path(f"pasted image {self._pasted}.png"), pasted=image))
        self.extraction_requested.emit(chip)
        return chip

    def add_documents(self, documents: Iterable[NewDocument]) -> None:
        """Documents already read (a message that could not be stored, given back), each
        with the file it was read from when this tray read it."""
        for document in documents:
            chip = self._add(AttachmentChip(self._sent_from.get(document.sha256, Path(document.name))))
            chip.set_ready(document)
            if document.data is not None:  # an image: its thumbnail is scaled off the GUI thread
                self.thumbnail_requested.emit(chip)

    def _add(self, chip: AttachmentChip) -> AttachmentChip:
        chip.close_clicked.connect(lambda c=chip: self.remove(c))
        chip.thumbnail_clicked.connect(lambda c=chip: self.image_requested.emit(c))
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

    def failed(self) -> list[AttachmentChip]:
        return [c for c in self._chips if c.state is ChipState.FAILED]

    def paths(self) -> list[Path]:
        """The files of the chips, for the draft kept over a restart (read again then); a
        chip known by its name alone has no file to read again."""
        return [c.path for c in self._chips if c.path.is_absolute()]

    def pasted_images(self) -> list[tuple[str, bytes]]:
        """The pasted images read so far, by their chips' names, as PNG bytes: the draft keeps
        them as files of its own (app/chats/draft_images.py)."""
        return [(c.path.name, c.document.data) for c in self._chips
                if c.pasted is not None and c.state is ChipState.READY and c.document is not None
                and c.document.data is not None]

    def ready_documents(self) -> tuple[NewDocument, ...]:
        """What goes with the message: the files read; a failed one never does."""
        ready = [c for c in self._chips if c.state is ChipState.READY and c.document is not None]
        self._sent_from = {c.document.sha256: c.path for c in ready if c.document is not None}
        return tuple(c.document for c in ready if c.document is not None)
