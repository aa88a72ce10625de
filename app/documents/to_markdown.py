"""DOCX, PPTX, XLSX and HTML as Markdown, through markitdown's converter for each.

The converter is picked by the file's format, never guessed from its bytes: markitdown's
own front door would load a file-type model (magika) for that. markitdown and what it brings
(pandas, mammoth, python-pptx) load on the first document, not with the app."""

from __future__ import annotations

import io
import re
import zipfile

from app.documents.errors import DocumentError, one_line
from app.documents.file_bytes import MAX_DOCUMENT_BYTES, megabytes
from app.documents.formats import Format, Reader
from app.documents.text_decode import detect_charset

# A DOCX, PPTX or XLSX is a zip of XML parts: what they may add up to once unpacked. A 1 MB
# file can hold a 1 GB part (a zip bomb) that the converters would parse into many GB.
MAX_UNPACKED_BYTES = MAX_DOCUMENT_BYTES
_ZIPPED = (Reader.DOCX, Reader.PPTX, Reader.XLSX)

# What markitdown writes before each slide of a presentation.
_SLIDE_MARK = re.compile(r"^<!-- Slide number: \d+ -->$", re.MULTILINE)


def convert_to_markdown(data: bytes, name: str, format_: Format) -> str:
    """The document as Markdown; DocumentError when the converter cannot read it."""
    from markitdown import MissingDependencyException, StreamInfo
    from markitdown.converters import DocxConverter, HtmlConverter, PptxConverter, XlsxConverter

    converters = {Reader.DOCX: DocxConverter, Reader.PPTX: PptxConverter, Reader.XLSX: XlsxConverter,
                  Reader.HTML: HtmlConverter}
    suffix = "." + format_.reader.value
    charset = detect_charset(data) if format_.reader is Reader.HTML else None
    # A converter per call: markitdown's hold no state worth sharing, and none is shared
    # between the threads that may extract at once.
    converter = converters[format_.reader]()
    if format_.reader in _ZIPPED:
        check_unpacked_size(data, name, format_.label)
    try:
        result = converter.convert(io.BytesIO(data), StreamInfo(extension=suffix, charset=charset))
    except MissingDependencyException:  # an install (or a bundle) without markitdown's extra
        raise DocumentError(f"{name} cannot be read: this Chorus lacks the library that reads "
                            f"{format_.label} (markitdown[{format_.reader.value}])") from None
    except Exception as exc:  # a broken zip, XML or workbook: any of the libraries beneath
        raise DocumentError(f"{name} is damaged or not {format_.label}: {one_line(exc)}") from None
    return result.markdown


def check_unpacked_size(data: bytes, name: str, label: str) -> None:
    """DocumentError when the zip's parts add up to more than MAX_UNPACKED_BYTES. The sizes
    the zip declares are a bound: Python's zipfile never inflates a part past its own."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
    except (zipfile.BadZipFile, ValueError) as exc:
        raise DocumentError(f"{name} is damaged or not {label}: {one_line(exc)}") from None
    if unpacked > MAX_UNPACKED_BYTES:
        raise DocumentError(f"{name} unpacks to {megabytes(unpacked)}; the most a document may hold "
                            f"unpacked is {megabytes(MAX_UNPACKED_BYTES)}")


def slide_starts(markdown: str) -> list[int]:
    """Where each slide begins in a presentation's Markdown (the first at 0)."""
    starts = [match.start() for match in _SLIDE_MARK.finditer(markdown)]
    if starts:
        starts[0] = 0
    return starts
