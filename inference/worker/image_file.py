"""An image's bytes to the RGB pixels a projector encodes, within limits: the one place an
image file is read (Pillow), so every door refuses the same files with the same words.

What a file may be: PNG, JPEG, GIF, WebP or BMP (Pillow's readers; not SVG), at most
MAX_IMAGE_BYTES, at most MAX_PIXELS pixels (a 20,000 x 20,000 PNG of a few kilobytes would
take 1.2 GB to decode: refused from its header, before any pixel is read). An animation gives
its first frame; an EXIF-rotated photo is turned upright; anything larger than MAX_SIDE on its
longer side is scaled down (projectors resize to a few hundred pixels anyway). A truncated or
damaged file, or text named .png, is a RequestError that ends its request alone.
"""

from __future__ import annotations

import io
from typing import NamedTuple

from inference.errors import RequestError

MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_PIXELS = 40_000_000
MAX_SIDE = 2048
_FORMATS = ("PNG", "JPEG", "GIF", "WEBP", "BMP")


class Pixels(NamedTuple):
    width: int
    height: int
    rgb: bytes  # width * height * 3, row by row


def decode_image(data: bytes) -> Pixels:
    """The image's pixels, upright, RGB. Raises RequestError for what cannot be one."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    if not data:
        raise RequestError("the image is empty")
    if len(data) > MAX_IMAGE_BYTES:
        raise RequestError(f"the image is {len(data) / 1e6:.1f} MB; at most {MAX_IMAGE_BYTES // 2**20} MiB is taken")
    try:
        image = Image.open(io.BytesIO(data), formats=_FORMATS)
    except UnidentifiedImageError:
        raise RequestError("the image is not a PNG, JPEG, GIF, WebP or BMP file") from None
    except Image.DecompressionBombError:
        raise RequestError(f"the image has more than {MAX_PIXELS:,} pixels") from None
    except (OSError, ValueError, SyntaxError) as exc:  # cut off within its header
        raise RequestError(f"the image could not be decoded ({exc}); the file is damaged or truncated") from None
    with image:
        width, height = image.size
        if width * height > MAX_PIXELS:
            raise RequestError(f"the image is {width}x{height}; at most {MAX_PIXELS:,} pixels are taken")
        try:
            image.seek(0)  # an animation: its first frame
            image.load()
            upright = ImageOps.exif_transpose(image)
            rgb = upright.convert("RGB")
        except (OSError, ValueError, SyntaxError) as exc:  # Pillow's words for a damaged file
            raise RequestError(f"the image could not be decoded ({exc}); the file is damaged or truncated") from None
    if max(rgb.size) > MAX_SIDE:
        rgb.thumbnail((MAX_SIDE, MAX_SIDE))
    return Pixels(rgb.width, rgb.height, rgb.tobytes())
