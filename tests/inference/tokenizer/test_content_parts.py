"""A message's content parts (OpenAI's shape) as the engine takes them: text joined, images
marked, their data: URLs read or refused with words a caller can act on."""

from __future__ import annotations

import base64

import pytest

from inference.errors import RequestError
from inference.tokenizer.content_parts import MAX_IMAGES, image_bytes, with_image_markers


def url(data: bytes, media: str = "image/png") -> dict:
    return {"type": "image_url", "image_url": {"url": f"data:{media};base64,{base64.b64encode(data).decode()}"}}


def test_text_is_joined_and_each_image_is_a_numbered_marker() -> None:
    messages = [{"role": "system", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "a "}, url(b"one"),
                                             {"type": "text", "text": " b"}, url(b"two")]}]
    marked, images = with_image_markers(messages, "<{}>")
    assert marked == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "a <0> b<1>"}]
    assert images == [b"one", b"two"]


@pytest.mark.parametrize(("part", "words"), [
    ({"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}, "only data: URLs"),
    ({"type": "image_url", "image_url": {"url": "data:image/png,rawbytes"}}, "must be base64"),
    ({"type": "image_url", "image_url": {"url": "data:text/plain;base64,aGk="}}, "is no image"),
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}}, "not valid base64"),
    ({"type": "image_url"}, "needs a url"),
    ({"type": "input_audio", "input_audio": {}}, "'input_audio' is not supported"),
])
def test_a_part_the_engine_cannot_take_is_refused(part: dict, words: str) -> None:
    with pytest.raises(RequestError, match=words):
        with_image_markers([{"role": "user", "content": [part]}], "<{}>")


def test_too_many_images_are_refused() -> None:
    parts = [url(b"x")] * (MAX_IMAGES + 1)
    with pytest.raises(RequestError, match=f"at most {MAX_IMAGES} images"):
        with_image_markers([{"role": "user", "content": parts}], "<{}>")


def test_a_plain_string_url_is_taken_too() -> None:
    assert image_bytes({"type": "image_url", "image_url": "data:image/jpeg;base64,AAEC"}) == b"\x00\x01\x02"
