"""Images among a command's files (`chorus ask IMAGE.png -q ...`, `chorus chat --attach
IMAGE.png`): read and checked by the engine's own limits before anything is stored, stored
once by sha256 as a kind of document (its bytes kept, no text: storage 0011) and attached to
the user's message like one, and shown to the model in that message as an image part
(the prompt's side: app/conversations/images.py)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from inference import MAX_IMAGES, RequestError, decode_image
from storage import NewDocument

MEDIA_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp", ".bmp": "image/bmp"}
NO_PROJECTOR = "{name} is an image, and the model sees none without its vision projector: give one with --mmproj FILE"


class ImageError(Exception):
    """A file that cannot be shown as an image, in one line."""


def is_image_path(path: str) -> bool:
    return Path(path).suffix.lower() in MEDIA_TYPES


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
        path = Path(p)
        try:
            data = path.read_bytes()
            decode_image(data)
        except OSError as exc:
            raise ImageError(f"{p}: {exc.strerror or exc}") from None
        except RequestError as exc:
            raise ImageError(f"{p}: {exc}") from None
        images.append(NewDocument(hashlib.sha256(data).hexdigest(), path.name, MEDIA_TYPES[path.suffix.lower()],
                                  len(data), "", None, (), data))
    return images

