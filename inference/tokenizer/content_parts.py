"""A message's content as a list of parts (OpenAI's shape): its text joined, each image
replaced by a marker the input processor turns into the image's tokens.

The one representation of an image in a request: {"type": "image_url", "image_url": {"url":
"data:image/png;base64,..."}} (the url may also be given as a plain string). A remote URL
is refused here: the engine fetches nothing.
"""

from __future__ import annotations

import base64
import binascii
from typing import Protocol

from inference.errors import RequestError
from inference.params import ImageEmbedding

MAX_IMAGES = 16  # per request


class ImageSource(Protocol):
    """What the input processor needs of a vision projector (worker/image_encoder.py)."""

    def embed(self, data: bytes) -> ImageEmbedding:
        """The image's embedding rows (cached per image); RequestError for a bad file."""
        ...


def has_parts(messages: list[dict]) -> bool:
    return any(isinstance(m, dict) and isinstance(m.get("content"), list) for m in messages)


def with_image_markers(messages: list[dict], marker: str) -> tuple[list[dict], list[bytes]]:
    """The messages with list contents made text: text parts joined, the k-th image as
    marker.format(k). Returns them and the images' bytes, in order."""
    images: list[bytes] = []
    out: list[dict] = []
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            out.append(message)
            continue
        texts: list[str] = []
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else None
            if kind == "text":
                texts.append(str(part.get("text", "")))
            elif kind == "image_url":
                if len(images) >= MAX_IMAGES:
                    raise RequestError(f"a request may show at most {MAX_IMAGES} images")
                texts.append(marker.format(len(images)))
                images.append(image_bytes(part))
            else:
                raise RequestError(f"a message part of type {kind!r} is not supported (text and image_url are)")
        out.append({**message, "content": "".join(texts)})
    return out, images


def image_bytes(part: dict) -> bytes:
    """The bytes of an image_url part's data URL."""
    ref = part.get("image_url")
    url = ref.get("url") if isinstance(ref, dict) else ref
    if not isinstance(url, str) or not url:
        raise RequestError("an image_url part needs a url")
    if not url.startswith("data:"):
        raise RequestError("only data: URLs are taken for images (the engine fetches nothing)")
    head, sep, payload = url.partition(",")
    if not sep or not head.endswith(";base64"):
        raise RequestError("an image's data: URL must be base64 (data:image/png;base64,...)")
    media = head[len("data:"):-len(";base64")]
    if media and not media.startswith("image/"):
        raise RequestError(f"a data: URL of type {media} is no image")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise RequestError("an image's data: URL is not valid base64") from None
