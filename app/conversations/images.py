"""A chat's images in the prompt it is built from. In the turns, a message's images stand as
marker lines before its text ("[image <sha256>]"): the document prompt (app/documents)
handles plain text, and with_images puts each image in its marker's place at the end, or,
for a model without a projector, the line "[image: NAME]" so that it at least knows one was
there. Images are documents that keep their bytes (storage 0011)."""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Protocol


class Attached(Protocol):
    """A stored attachment or a document (an image when is_image)."""

    @property
    def sha256(self) -> str: ...

    @property
    def is_image(self) -> bool: ...


class Image(Protocol):
    """An image's document, stored (DocumentRecord) or about to be (NewDocument)."""

    @property
    def sha256(self) -> str: ...

    @property
    def name(self) -> str: ...

    @property
    def mime(self) -> str: ...

    @property
    def data(self) -> bytes | None: ...


def marked(text: str, attached: Iterable[Attached]) -> str:
    """A user message's text as a prompt's turn: a marker line for each image it attaches first."""
    return "".join(f"{_marker(a.sha256)}\n" for a in attached if a.is_image) + text


def with_images(messages: Sequence[dict], images: Sequence[Image], show: bool) -> tuple[dict, ...]:
    """The prompt's messages with each image's marker line in a user message replaced by the
    image (show: the model has a projector) or by the line "[image: NAME]" (it has none)."""
    by_marker = {f"{_marker(i.sha256)}\n": i for i in images}
    if not by_marker:
        return tuple(messages)
    return tuple(_shown(m, by_marker, show) if m.get("role") == "user" and isinstance(m.get("content"), str) else m
                 for m in messages)


def _marker(sha256: str) -> str:
    return f"[image {sha256}]"


def _shown(message: dict, by_marker: dict[str, Image], show: bool) -> dict:
    text: str = message["content"]
    parts: list[dict] = []
    rest = text
    while True:
        at = [(rest.find(m), m) for m in by_marker if m in rest]
        if not at:
            break
        start, marker = min(at)
        image = by_marker[marker]
        parts.append({"type": "text", "text": rest[:start]})
        parts.append(_part(image) if show else {"type": "text", "text": f"[image: {image.name}]\n"})
        rest = rest[start + len(marker):]
    parts.append({"type": "text", "text": rest})
    if all(p["type"] == "text" for p in parts):
        return {**message, "content": "".join(p["text"] for p in parts)}
    return {**message, "content": [p for p in parts if p["type"] != "text" or p["text"]]}


def _part(image: Image) -> dict:
    data = image.data or b""
    url = f"data:{image.mime};base64,{base64.b64encode(data).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}
