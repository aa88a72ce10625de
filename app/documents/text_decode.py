"""Bytes of a text file as the text it holds, verbatim: its encoding found, nothing rewritten."""

from __future__ import annotations

import codecs

import charset_normalizer

from app.documents.errors import DocumentError

# A byte-order mark says the encoding outright. UTF-32's marks begin with UTF-16's: first.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_text(data: bytes, name: str) -> str:
    """The text of a file with a text suffix; DocumentError when it holds binary data or no
    encoding makes sense of it."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                raise DocumentError(f"{name} is not valid {encoding.upper()} text") from None
    # Text in one-byte and UTF-8 encodings never holds NUL; binary files nearly always do.
    if b"\x00" in data:
        raise DocumentError(f"{name} is not a text file: it holds binary data")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    best = charset_normalizer.from_bytes(data).best()
    if best is None:
        raise DocumentError(f"{name} is not a text file: its bytes are text in no known encoding")
    return str(best)


def detect_charset(data: bytes) -> str:
    """The encoding of an HTML page's bytes, for the converter (which assumes UTF-8)."""
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8-sig"
    try:
        data.decode("utf-8")
        return "utf-8"
    except UnicodeDecodeError:
        best = charset_normalizer.from_bytes(data).best()
        return best.encoding if best is not None else "utf-8"
