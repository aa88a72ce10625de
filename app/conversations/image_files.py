"""An image a user attaches (a file, a drop, a pasted screenshot), read and checked by the
engine's own limits and words (inference's decode_image: 20 MiB, 40 million pixels, PNG,
JPEG, GIF, WebP, BMP) before anything is stored, as the document that stores it: once by
sha256, its bytes kept, no text (storage 0011). The window and the terminal's commands both
take their images here, so a file is refused the same way at every door. Qt-free; reading
and decoding take a moment, so the window calls it on a worker thread."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

from app.documents.errors import DocumentError
from app.documents.file_bytes import read_file_bytes
from inference import MAX_IMAGE_BYTES, RequestError, decode_image
from storage import NewDocument

MEDIA_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp", ".bmp": "image/bmp"}
# What a chip says where the chat's model has no projector: the prompt then carries the line
# "[image: NAME]" (app/conversations/images.py), so the model knows one was there.
NOT_SEEN = "this model does not see images: only its name is sent"


class ImageError(Exception):
    """A file that cannot be shown as an image, in one line."""


def is_image_path(path: str | Path) -> bool:
    return Path(path).suffix.lower() in MEDIA_TYPES


def image_document(name: str, data: bytes) -> NewDocument:
    """The document of an image's bytes (name: its file's name, whose suffix gives its type;
    a pasted image is PNG), decoded once as the engine will decode it. Raises ImageError."""
    try:
        decode_image(data)
    except RequestError as exc:
        raise ImageError(str(exc)) from None
    mime = MEDIA_TYPES.get(Path(name).suffix.lower(), "image/png")
    return NewDocument(hashlib.sha256(data).hexdigest(), name, mime, len(data), "", None, (), data)


def read_image(path: Path, cancel: threading.Event | None = None) -> NewDocument:
    """An image file read whole (the document intake's checks: a folder, a FIFO, a file that
    changes while read) and decoded. One too large is refused from its size, before a byte
    is read. Raises ImageError."""
    try:
        size = path.stat().st_size
    except OSError:
        size = 0  # read_file_bytes says what is wrong with it
    if size > MAX_IMAGE_BYTES:
        raise ImageError(f"the image is {size / 1e6:.1f} MB; at most {MAX_IMAGE_BYTES // 2**20} MiB is taken")
    try:
        data = read_file_bytes(path, cancel)
    except DocumentError as exc:
        raise ImageError(str(exc)) from None
    return image_document(path.name, data)
