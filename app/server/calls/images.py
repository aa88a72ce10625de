"""An image in any API's body (OpenAI's image_url part, the Responses API's input_image,
Anthropic's base64 image block) to the one part the engine takes: {"type": "image_url",
"image_url": {"url": "data:<media>;base64,..."}} (inference/tokenizer/content_parts.py).

What a body can say is checked here, with a 400 naming its field: a remote URL or a file id
(this server fetches nothing), a media type that is no image the engine reads, more images
than a request may show. What only the file can say (it does not decode, it is too large or
has too many pixels) and a model without a projector are the engine's 400s, at prepare."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from app.server.calls.parsing import bad, shown
from inference import MAX_IMAGES

IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp", "image/bmp")
NO_FETCH = ("this server fetches no remote images from that host (allow HOST with `chorus serve --image-host HOST`, "
            "or under Images by URL in the window's File → Serve over HTTP)")


def data_url_part(url: Any, where: str) -> dict:
    """An image given as a URL string: a data: URL of an image type, or a 400."""
    if not isinstance(url, str):
        raise bad(where, f"must be a data: URL string (data:image/png;base64,...), got {shown(url)}")
    if not url.startswith("data:"):
        raise bad(where, f"must be a data: URL (data:image/png;base64,...): {NO_FETCH}")
    media = url[len("data:"):].split(";", 1)[0].split(",", 1)[0].lower()
    _check_media(media, where)
    return {"type": "image_url", "image_url": {"url": url}}


def base64_part(media: Any, data: Any, where: str) -> dict:
    """An image given as its media type and base64 text (Anthropic's source)."""
    if not isinstance(media, str):
        raise bad(f"{where}.media_type", f"must be a string, got {shown(media)}")
    _check_media(media.lower(), f"{where}.media_type")
    if not isinstance(data, str) or not data:
        raise bad(f"{where}.data", f"must be the image's bytes in base64, got {shown(data)}")
    return {"type": "image_url", "image_url": {"url": f"data:{media.lower()};base64,{data}"}}


def _check_media(media: str, where: str) -> None:
    if media not in IMAGE_TYPES:
        raise bad(where, f"has the media type {media or 'none'}; images of {', '.join(IMAGE_TYPES)} are taken")


def is_image(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "image_url"


def within_limit(messages: Iterable[dict], where: str) -> None:
    """A 400 naming `where` when the messages show more images than a request may."""
    count = sum(1 for m in messages if isinstance(m.get("content"), list) for part in m["content"] if is_image(part))
    if count > MAX_IMAGES:
        raise bad(where, f"show {count} images; a request may show at most {MAX_IMAGES}")
