"""app/conversations/image_files.py: the one intake of an image the user attaches (the
window's chips, the terminal's files), by the engine's own limits and words."""

from __future__ import annotations

import hashlib
import threading

import pytest
from PIL import Image

from app.conversations import image_files
from app.conversations.image_files import ImageError, image_document, is_image_path, read_image
from inference import MAX_IMAGE_BYTES
from tests.inference.core.test_engine_images import RED


def png() -> bytes:
    return RED  # a gradient: its pixel data is more than a header


def test_an_image_becomes_a_document_that_keeps_its_bytes():
    data = png()
    doc = image_document("red.png", data)
    assert (doc.sha256, doc.name, doc.mime, doc.size_bytes) == (hashlib.sha256(data).hexdigest(), "red.png",
                                                                "image/png", len(data))
    assert doc.data == data and doc.text == "" and doc.chunks == ()
    assert image_document("photo.JPG", data).mime == "image/jpeg"  # by its name's suffix
    assert image_document("pasted image 1", data).mime == "image/png"  # a paste is PNG


@pytest.mark.parametrize("data, words", [
    (RED[: len(RED) // 2], "damaged or truncated"),
    (b"this is text named .png", "not a PNG, JPEG, GIF, WebP or BMP"),
    (b"", "the image is empty"),
])
def test_a_broken_image_is_one_line_in_the_engines_words(data, words):
    with pytest.raises(ImageError, match=words) as caught:
        image_document("broken.png", data)
    assert "\n" not in str(caught.value)


def test_a_file_is_read_and_checked(tmp_path):
    path = tmp_path / "dot.webp"
    Image.new("RGB", (4, 4), (0, 0, 255)).save(path, "WEBP")
    doc = read_image(path)
    assert doc.mime == "image/webp" and doc.data == path.read_bytes()
    with pytest.raises(ImageError, match="is a folder"):
        read_image(tmp_path)
    with pytest.raises(ImageError, match="does not exist"):
        read_image(tmp_path / "gone.png")
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(Exception, match="cancelled"):
        read_image(path, cancel)


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path, monkeypatch):
    path = tmp_path / "huge.png"
    with open(path, "wb") as f:
        f.truncate(MAX_IMAGE_BYTES + 1)  # sparse: nothing to read
    read = []
    monkeypatch.setattr(image_files, "read_file_bytes", lambda *a: read.append(a))
    with pytest.raises(ImageError, match="at most 20 MiB"):
        read_image(path)
    assert read == []


def test_images_are_known_by_their_suffix():
    assert all(is_image_path(f"a.{s}") for s in ("png", "JPG", "jpeg", "gif", "webp", "bmp"))
    assert not is_image_path("a.svg") and not is_image_path("notes.md")
