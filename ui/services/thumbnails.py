"""Thumbnails of the images attached to sent messages, by sha256: read from storage and
decoded and scaled on the storage thread (QImage is safe off the GUI thread, QPixmap is
not), kept for the run, and asked for by the message delegate while it paints. The first
paint draws the chip's outline; once a thumbnail is loaded, the views that asked repaint."""

from __future__ import annotations

import logging
from concurrent.futures import Future

import shiboken6
from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QImage

from storage import ChatRepository, DocumentRepository
from ui.services.threads import GuiCalls, StorageThread
from ui.widgets.chat.message_chips import THUMB
from ui.widgets.chat.message_delegate import MessageDelegate
from ui.widgets.chat.message_list import MessageList

log = logging.getLogger(__name__)

# Decoded at twice the chip's square: sharp on a 2x screen, a few KB each.
THUMB_PIXELS = 2 * THUMB


def thumbnail_of(data: bytes, side: int = THUMB_PIXELS) -> QImage:
    """An image's bytes as a QImage at most side pixels on its longer edge (a null image
    for bytes Qt cannot read). Any thread."""
    image = QImage.fromData(data)
    if image.isNull() or max(image.width(), image.height()) <= side:
        return image
    return image.scaled(side, side, Qt.AspectRatioMode.KeepAspectRatio, Qt.TransformationMode.SmoothTransformation)


def full_image(data: bytes) -> QImage:
    """An image's bytes decoded whole, for the large view (a worker thread's job)."""
    return QImage.fromData(data)


class ImageThumbnails(QObject):
    loaded = Signal(str)  # the sha256 whose thumbnail is now known

    def __init__(self, repo: ChatRepository, storage: StorageThread, gui: GuiCalls) -> None:
        super().__init__()
        self._documents = DocumentRepository(repo.db)
        self._storage = storage
        self._gui = gui
        self._images: dict[str, QImage] = {}
        self._asked: set[str] = set()

    def get(self, sha256: str) -> QImage | None:
        """The thumbnail if loaded; else None, and it is loaded (once) for the next paint."""
        image = self._images.get(sha256)
        if image is None and sha256 not in self._asked:
            self._asked.add(sha256)
            self._load(sha256)
        return image

    def _load(self, sha256: str) -> None:
        def work() -> QImage:
            return thumbnail_of(self._documents.document(sha256).data or b"")

        def done(future: Future) -> None:
            try:
                image = future.result()
            except Exception as exc:  # noqa: BLE001 - a thumbnail is decoration: the chip keeps its outline
                log.warning("thumbnail of image %s not read: %s", sha256[:12], exc)
                return
            self._gui.post(lambda: self._show(sha256, image))

        try:
            self._storage.submit(work).add_done_callback(done)
        except RuntimeError:  # the window is closing: its storage thread is shut
            pass

    def _show(self, sha256: str, image: QImage) -> None:
        self._images[sha256] = image
        self.loaded.emit(sha256)

    def wire(self, delegate: MessageDelegate, view: MessageList) -> None:
        """delegate paints this cache's thumbnails; view repaints when one comes."""
        delegate.thumbnails = self.get
        viewport = view.viewport()
        self.loaded.connect(lambda _sha, v=viewport: shiboken6.isValid(v) and v.update())
