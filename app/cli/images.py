"""Images among a command's files (`chorus ask IMAGE.png -q ...`, `chorus chat --attach
IMAGE.png`): read and checked by the engine's own limits before anything is stored, stored
once by sha256 as a kind of document (its bytes kept, no text: storage 0011) and attached to
the user's message like one, and shown to the model in that message as an image part
(the prompt's side: app/conversations/images.py). The reading is the window's too
(app/conversations/image_files.py)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from app.conversations.image_files import MEDIA_TYPES, ImageError, image_document, is_image_path
from inference import MAX_IMAGES
from storage import NewDocument

NO_PROJECTOR = "{name} is an image, and the model sees none without its vision projector: give one with --mmproj FILE"

__all__ = ["MEDIA_TYPES", "NO_PROJECTOR", "ImageError", "is_image_path", "read_images", "split_files"]


def split_files(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """The documents' paths and the images' (by their extension), each in the given order."""
    return [p for p in paths if not is_image_path(p)], [p for p in paths if is_image_path(p)]


def read_images(paths: Sequence[str]) -> list[NewDocument]:
    """Each image read and decoded once as the engine will (its limits, its words), as the
    document that stores it: a bad one stops the command whole, before anything is stored."""
    if len(paths) > MAX_IMAGES:
        raise ImageError(f"{len(paths)} images; a message may show at most {MAX_IMAGES}")
    images: list[NewDocument] = []
    for p in paths:
        try:
            data = Path(p).read_bytes()
        except OSError as exc:
            raise ImageError(f"{p}: {exc.strerror or exc}") from None
        try:
            images.append(image_document(Path(p).name, data))
        except ImageError as exc:
            raise ImageError(f"{p}: {exc}") from None
    return images
