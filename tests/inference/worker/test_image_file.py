"""The image intake's limits (inference/worker/image_file.py), on real files made here with
Pillow: each bad file a one-line RequestError, memory bounded; odd good ones read right."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image

from inference.errors import RequestError
from inference.worker.image_file import MAX_IMAGE_BYTES, MAX_SIDE, decode_image


def encoded(image: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **kw)
    return out.getvalue()


def bomb_png(width: int, height: int) -> bytes:
    """A valid PNG header of width x height whose pixels were never written (a few bytes):
    what a decompression bomb looks like before it is decoded."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    pixels = chunk(b"IDAT", zlib.compress(b"\0" * 64))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + pixels + chunk(b"IEND", b"")


def test_a_png_becomes_its_rgb_pixels() -> None:
    pixels = decode_image(encoded(Image.new("RGBA", (7, 3), (10, 20, 30, 128))))
    assert (pixels.width, pixels.height) == (7, 3)
    assert pixels.rgb[:3] == bytes([10, 20, 30]) and len(pixels.rgb) == 7 * 3 * 3


@pytest.mark.parametrize(("data", "words"), [
    (b"", "empty"),
    (b"hello, a text file named cat.png\n", "not a PNG, JPEG"),
    (b'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>', "not a PNG, JPEG"),
    (encoded(Image.new("RGB", (64, 64), (1, 2, 3)))[:-40], "damaged or truncated"),
    (encoded(Image.new("RGB", (64, 64), (1, 2, 3)), "JPEG")[:300], "damaged or truncated"),
    (bomb_png(20_000, 20_000), "pixels"),
    (b"\x89PNG" + b"\0" * (MAX_IMAGE_BYTES + 1), "MiB"),
])
def test_what_is_no_image_or_too_large_is_refused_in_one_line(data: bytes, words: str) -> None:
    with pytest.raises(RequestError, match=words) as caught:
        decode_image(data)
    assert "\n" not in str(caught.value)


def test_an_animation_gives_its_first_frame() -> None:
    frames = [Image.new("RGB", (4, 4), (255, 0, 0)), Image.new("RGB", (4, 4), (0, 0, 255))]
    gif = encoded(frames[0], "GIF", save_all=True, append_images=frames[1:], duration=10)
    assert decode_image(gif).rgb[:3] == bytes([255, 0, 0])


def test_an_exif_rotated_photo_is_read_upright() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to view
    photo = encoded(Image.new("RGB", (40, 20), (0, 128, 0)), "JPEG", exif=exif)
    assert (decode_image(photo).width, decode_image(photo).height) == (20, 40)


def test_a_large_image_is_scaled_down_to_the_side_limit() -> None:
    pixels = decode_image(encoded(Image.new("RGB", (MAX_SIDE * 2, MAX_SIDE // 2), (9, 9, 9))))
    assert (pixels.width, pixels.height) == (MAX_SIDE, MAX_SIDE // 4)
