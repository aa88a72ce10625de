"""Images a client names by an http(s) URL, fetched by the server from the hosts its operator
allowed (`chorus serve --image-host HOST`), before the body is parsed: each becomes the data:
URL (or Anthropic's base64 source) the parsers take, so every API family, its limits and its
400s stay as they are. A URL of a host not allowed is left as sent, and the parser refuses it
(this server fetches nothing unless told).

The three shapes: OpenAI chat's {"image_url": {"url": U}}, the Responses API's
{"type": "input_image", "image_url": U}, Anthropic's {"type": "image", "source": {"type":
"url", "url": U}}. Each hop of a fetch (redirects followed by hand) must stay on an allowed
host; the body is cut off past the engine's image size and the fetch past a time; what comes
back must be an image by its content type or its first bytes. A failure is a 400 naming the
field, in the API's own error shape. Runs in a worker thread (it blocks on the network)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, TypeGuard

from app.server.calls.images import IMAGE_TYPES
from app.server.calls.parsing import bad
from app.server.http.errors import ApiError
from app.tools.web import WebError, WebSettings, fetch_bytes, on_hosts
from inference import MAX_IMAGE_BYTES, MAX_IMAGES

FETCH_TIMEOUT_S = 20.0
MAX_REDIRECTS = 3
# An image's first bytes, for a server that says application/octet-stream.
MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"),
         (b"BM", "image/bmp"))


@dataclass
class _Ref:
    """Where one remote image is named: the dict holding it, its key, the field's path."""

    holder: dict
    key: str
    url: str
    where: str
    anthropic: bool = False  # a source dict, replaced whole by a base64 one


def may_name_remote_images(raw: bytes) -> bool:
    """A cheap look at the body before walking it: no URL, nothing to fetch."""
    return b"http://" in raw or b"https://" in raw


def names_images_of(body: dict, hosts: tuple[str, ...]) -> bool:
    """Whether the body names an image by a URL of one of hosts."""
    return any(on_hosts(ref.url, hosts) for ref in _refs(body, ()))


def fetch_remote_images(body: dict, hosts: tuple[str, ...]) -> None:
    """Replaces, in body, each image URL of an allowed host by the image's bytes; ApiError
    (400) naming the field whose image could not be fetched."""
    refs = [ref for ref in _refs(body, ()) if on_hosts(ref.url, hosts)]
    if len(refs) > MAX_IMAGES:  # not fetched at all: the parser names the count's field too
        raise ApiError(400, f"the request names {len(refs)} remote images; a request may show at most {MAX_IMAGES}")
    settings = WebSettings(allow_private=True, hosts=hosts, max_bytes=MAX_IMAGE_BYTES, timeout_s=FETCH_TIMEOUT_S,
                           max_redirects=MAX_REDIRECTS)
    for ref in refs:
        media, data = _fetch(ref, settings)
        encoded = base64.b64encode(data).decode("ascii")
        if ref.anthropic:
            ref.holder[ref.key] = {"type": "base64", "media_type": media, "data": encoded}
        else:
            ref.holder[ref.key] = f"data:{media};base64,{encoded}"


def _fetch(ref: _Ref, settings: WebSettings) -> tuple[str, bytes]:
    try:
        data, content_type, _final = fetch_bytes(ref.url, settings)
    except WebError as exc:
        raise bad(ref.where, f"could not be fetched: {exc}") from None
    media = content_type.split(";", 1)[0].strip().lower()
    if media not in IMAGE_TYPES:
        media = next((kind for magic, kind in MAGIC if data.startswith(magic)), "")
        if not media and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
            media = "image/webp"
    if not media:
        raise bad(ref.where, f"did not answer an image: {ref.url} sent {content_type or 'no content type'}")
    return media, data


def _refs(body: Any, path: tuple[str | int, ...]) -> list[_Ref]:
    """Every remote image URL in the body, with its field's path as its API's parser names
    it (OpenAI's messages[0].content[1], Anthropic's messages.0.content.1). A walk with a
    stack, not recursion: a body nested as deep as the JSON parser takes must not overflow."""
    found: list[_Ref] = []
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(body, path)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, list):
            stack.extend((item, (*at, i)) for i, item in reversed(list(enumerate(node))))
        elif isinstance(node, dict):
            found += _named_here(node, at)
            stack.extend((value, (*at, key)) for key, value in reversed(node.items())
                         if isinstance(value, (list, dict)) and key not in ("image_url", "source"))
    return found


def _named_here(node: dict, at: tuple[str | int, ...]) -> list[_Ref]:
    image, source = node.get("image_url"), node.get("source")
    if isinstance(image, dict) and _remote(image.get("url")):
        return [_Ref(image, "url", image["url"], _bracketed((*at, "image_url", "url")))]
    if _remote(image):
        return [_Ref(node, "image_url", image, _bracketed((*at, "image_url")))]
    if node.get("type") == "image" and isinstance(source, dict) and source.get("type") == "url" \
            and _remote(source.get("url")):
        return [_Ref(node, "source", source["url"], ".".join(map(str, (*at, "source"))), anthropic=True)]
    return []


def _bracketed(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(".")


def _remote(value: object) -> TypeGuard[str]:
    return isinstance(value, str) and value.startswith(("http://", "https://"))
