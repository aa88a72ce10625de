"""Attachments off the GUI thread: reading a file (or a pasted image) into a document for a
composer's chip (on worker threads, cancelled by the chip's event), and reading a stored
document back for the dialog a chip on a sent message opens (on the storage thread). An
image is read by app/conversations/image_files.py (the engine's limits and words) and its
thumbnail scaled on the same worker; shown large, it is decoded off the GUI thread as well."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

import shiboken6
from PySide6.QtCore import QBuffer, QByteArray, QIODevice
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QWidget

from app.conversations.image_files import NOT_SEEN, ImageError, image_document, is_image_path, read_image
from app.documents import DocumentError, ExtractionCancelled, extract_document, fit_text
from storage import DocumentRecord, DocumentRepository, NewDocument, SourceRecord
from ui.services.context import ControllerContext
from ui.services.daemon_pool import DaemonPool
from ui.services.threads import GuiCalls
from ui.services.thumbnails import full_image, thumbnail_of
from ui.services.worker_hops import WorkerHops, first_line
from ui.widgets.chat.attachment_chips import THUMB_SIDE, AttachmentChip
from ui.widgets.chat.document_dialog import DocumentTextDialog, open_document_dialog
from ui.widgets.chat.document_labels import document_details, image_details
from ui.widgets.chat.image_dialog import ImageDialog, open_image_dialog

log = logging.getLogger(__name__)

T = TypeVar("T")
READERS = 2  # files read at once: a big PDF never holds up a small text file for long


def reading_failure(exc: BaseException) -> str:
    """A DocumentError (an ImageError) is a sentence for the user as it is; anything else is
    a bug, logged."""
    if isinstance(exc, (DocumentError, ExtractionCancelled, ImageError)):
        return first_line(exc)
    log.error("extracting a document failed", exc_info=exc)
    return f"Could not read the file: {first_line(exc)}"


class DocumentReading:
    """Each chip's file is read on a daemon thread (a stuck read never holds the app open at
    exit); progress and the end come back on the GUI thread, to the chip if it is still
    there (× removes it, and a closed tab deletes it)."""

    def __init__(self, gui: GuiCalls, measure: Callable[[NewDocument], str] | None = None,
                 sees_images: Callable[[], bool] | None = None) -> None:
        """measure: what a read document costs in the model's context, for its chip (on the
        reading thread: it tokenizes). sees_images: whether the chat's model is shown images
        (else an image's chip says only its name is sent); None: not said."""
        self.gui = gui
        self.measure = measure
        self.sees_images = sees_images
        self.pool = DaemonPool(READERS, "chorus-documents")
        self.hops = WorkerHops(gui)
        self.last: Future | None = None  # the latest file's reading (tests wait on it)

    def read(self, chip: AttachmentChip) -> Future:
        if chip.pasted is not None or is_image_path(chip.path):
            return self._read_image(chip)
        path, cancel = chip.path, chip.cancel
        shown = [-1]  # the last percentage posted: one hop per percent, not per page

        def progress(fraction: float) -> None:
            percent = int(100 * fraction)
            if percent != shown[0]:
                shown[0] = percent
                self.gui.post(lambda: _if_alive(chip, chip.set_progress, fraction))

        def read_and_measure() -> tuple[NewDocument, str]:
            document = extract_document(path, cancel, progress)
            return document, self.measure(document) if self.measure is not None else ""

        self.last = self.hops.run(self.pool, read_and_measure,
                                  lambda done: _if_alive(chip, lambda d: chip.set_ready(*d), done),
                                  lambda message: _if_alive(chip, chip.set_failed, message),
                                  describe=reading_failure)
        return self.last

    def _read_image(self, chip: AttachmentChip) -> Future:
        """An image file, or a pasted image's pixels encoded as PNG, checked as the engine
        checks it, with its thumbnail and what the model will make of it."""
        path, pasted, cancel, sees = chip.path, chip.pasted, chip.cancel, self.sees_images

        def read() -> tuple[NewDocument, str, QImage]:
            document = (image_document(path.name, png_bytes(pasted)) if pasted is not None
                        else read_image(path, cancel))
            # Two lines: a chip beside its thumbnail is too narrow for the sentence in one.
            note = "" if sees is None else "the model sees it" if sees() else NOT_SEEN.replace(": ", ":\n", 1)
            return document, note, thumbnail_of(document.data or b"", 2 * THUMB_SIDE)

        self.last = self.hops.run(self.pool, read,
                                  lambda done: _if_alive(chip, lambda d: chip.set_ready(*d), done),
                                  lambda message: _if_alive(chip, chip.set_failed, message),
                                  describe=reading_failure)
        return self.last

    def thumbnail(self, chip: AttachmentChip) -> Future | None:
        """The thumbnail of an image chip whose document was given back (not read again)."""
        data = chip.document.data if chip.document is not None else None
        if data is None:
            return None
        return self.hops.run(self.pool, lambda: thumbnail_of(data, 2 * THUMB_SIDE),
                             lambda image: _if_alive(chip, chip.set_thumbnail, image),
                             lambda _message: None, describe=reading_failure)

    def shutdown(self) -> None:
        self.hops.closed = True
        self.pool.shutdown()


def png_bytes(image: QImage) -> bytes:
    """A pasted image as the PNG file it is stored as (a worker thread's job: a 4K
    screenshot takes a while to compress)."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):  # type: ignore[call-overload]  # the stubs say bytes; PySide takes str
        raise ImageError("the pasted image could not be saved as PNG")
    buffer.close()
    return bytes(data.data())


def context_fit(ctx: ControllerContext) -> Callable[[NewDocument], str]:
    """A read document's tokens on the main engine's model and whether it fits whole."""

    def measure(document: NewDocument) -> str:
        counter, n_ctx = ctx.engines.token_counter(ctx.engines.engine)
        return fit_text(document.name, document.text, document.pages, counter, n_ctx)

    return measure


def main_sees_images(ctx: ControllerContext) -> Callable[[], bool]:
    """Whether the main engine's model is shown a chat's images (any thread)."""
    return lambda: ctx.engines.sees_images(ctx.engines.engine)


def _if_alive(chip: AttachmentChip, show: Callable[[T], None], value: T) -> None:
    """show(value) unless the chip was removed (×) or deleted with its tab meanwhile."""
    if shiboken6.isValid(chip) and not chip.cancel.is_set():
        show(value)


class DocumentViewer:
    """A sent message's document, or a reply's citation, in a non-modal dialog; the text is
    read from storage on the storage thread."""

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.dialog: DocumentTextDialog | None = None  # the last one opened (tests look at it)
        self.image_dialog: ImageDialog | None = None  # the last image shown large

    def show_document(self, parent: QWidget, sha256: str, name: str) -> DocumentTextDialog:
        dialog = self._open(parent, name)
        self._load(dialog, sha256, lambda doc: (document_details(doc.pages, doc.size_bytes, len(doc.text)),
                                                doc.text))
        return dialog

    def show_source(self, parent: QWidget, source: SourceRecord) -> DocumentTextDialog:
        """The excerpt [label] the reply was shown: the chunk's span of the document's text."""
        page = f" · page {source.page}" if source.page else ""
        page += f" · {source.where}" if source.where else ""
        dialog = self._open(parent, f"[{source.label}] {source.name}")

        def excerpt(doc: DocumentRecord) -> tuple[str, str]:
            chunk = doc.chunks[source.chunk_index]
            cited = "cited in the reply" if source.cited else "shown to the model, not cited"
            return f"Excerpt [{source.label}] of {doc.name}{page} · {cited}", doc.text[chunk.start:chunk.end]

        self._load(dialog, source.sha256, excerpt)
        return dialog

    def show_image(self, parent: QWidget, sha256: str, name: str) -> ImageDialog:
        """A sent message's image, large: its bytes read and decoded on the storage thread."""
        dialog = self.image_dialog = open_image_dialog(parent.window(), name)
        documents = DocumentRepository(self.ctx.repo.db)

        def work() -> tuple[str, QImage]:
            doc = documents.document(sha256)
            return image_details(doc.mime, doc.size_bytes), full_image(doc.data or b"")

        self.ctx.storage.run(work, lambda shown: _show_image(dialog, *shown),
                             lambda exc: _image_failed(dialog, exc))
        return dialog

    def show_chip_image(self, chip: AttachmentChip) -> ImageDialog | None:
        """A composer chip's image (not sent yet), large: decoded on the storage thread."""
        document = chip.document
        if document is None or document.data is None:
            return None
        dialog = self.image_dialog = open_image_dialog(chip.window(), document.name)
        data, details = document.data, image_details(document.mime, document.size_bytes)
        self.ctx.storage.run(lambda: full_image(data), lambda image: _show_image(dialog, details, image),
                             lambda exc: _image_failed(dialog, exc))
        return dialog

    def _open(self, parent: QWidget, title: str) -> DocumentTextDialog:
        self.dialog = open_document_dialog(parent.window(), title)
        return self.dialog

    def _load(self, dialog: DocumentTextDialog, sha256: str, shown) -> None:
        documents = DocumentRepository(self.ctx.repo.db)

        def show(doc: DocumentRecord) -> None:
            if shiboken6.isValid(dialog):
                dialog.show_text(*shown(doc))

        def failed(exc: Exception) -> None:
            if shiboken6.isValid(dialog):
                dialog.show_error(f"The document could not be read: {first_line(exc)}")

        self.ctx.storage.run(lambda: documents.document(sha256), show, failed)


def _show_image(dialog: ImageDialog, details: str, image: QImage) -> None:
    if not shiboken6.isValid(dialog):
        return
    if image.isNull():
        dialog.show_error("The image could not be decoded")
    else:
        dialog.show_image(details, image)


def _image_failed(dialog: ImageDialog, exc: Exception) -> None:
    if shiboken6.isValid(dialog):
        dialog.show_error(f"The image could not be read: {first_line(exc)}")
