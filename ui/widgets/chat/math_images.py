"""LaTeX math in a bubble: each formula that app/chats/latex.py finds becomes an image in
the message's QTextDocument, rendered by matplotlib's mathtext in the text's colour and size
(so it follows the theme), cached by (source, colour, size). Inline math sits on the text's
baseline; display math is a centred paragraph of its own. A formula mathtext cannot read is
shown as its source, as code. The message's text keeps the LaTeX: copying it copies the
source.

Until matplotlib has been imported and its fonts loaded (about a second, on a daemon
thread: the GUI thread never waits for it) formulas show as their source; `ready` then
tells the views to lay their messages out again."""

from __future__ import annotations

from collections import OrderedDict
from functools import lru_cache

import numpy as np
from PySide6.QtCore import QObject, Qt, QUrl, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontInfo,
    QFontMetricsF,
    QGuiApplication,
    QImage,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
)

from app.chats import latex

SCHEME = "chorus-math"
DISPLAY_SCALE = 1.25  # display math a little larger than the text
CACHE_SIZE = 1024


class MathImages(QObject):
    ready = Signal()  # matplotlib is loaded: documents laid out meanwhile show the source

    def __init__(self) -> None:
        super().__init__()
        self._images: OrderedDict[tuple, QImage | None] = OrderedDict()
        self.rendered = 0  # formulas rendered (not found in the cache)

    def image(self, source: str, color: QColor, font: QFont, display: bool) -> QImage | None:
        size = QFontInfo(font).pixelSize() * (DISPLAY_SCALE if display else 1.0)
        scale = _pixel_ratio()
        key = (source, color.rgba(), size, scale, display)
        if key in self._images:
            self._images.move_to_end(key)
            return self._images[key]
        self.rendered += 1
        image = _image(latex.render(source, size, scale), color, QFontMetricsF(font).xHeight() / 2 * scale, scale)
        self._images[key] = image
        if len(self._images) > CACHE_SIZE:
            self._images.popitem(last=False)
        return image

    def with_math(self, markdown: str, color: QColor, font: QFont, found: dict[str, tuple[QImage, bool]]) -> str:
        """markdown with each formula replaced by an image reference (its name, image and
        whether it is display math go into found), or by its source as code where it cannot
        be rendered. Unchanged until matplotlib is ready (warm_up starts it)."""
        spans = latex.math_spans(markdown)
        if not spans:
            return markdown
        if not latex.ready():
            latex.warm_up(self.ready.emit)  # from the warm-up thread: queued to the GUI thread
            return markdown
        out, pos = [], 0
        for span in spans:
            out.append(markdown[pos:span.start])
            image = self.image(span.source, color, font, span.display)
            if image is None:
                out.append(_code(markdown[span.start:span.end]))
            else:
                name = f"{SCHEME}:{len(found)}"
                found[name] = (image, span.display)
                ref = f"![math]({name})"
                if span.display and _alone_on_its_lines(markdown, span.start, span.end):
                    ref = _paragraph(markdown, span.start, span.end, ref)
                out.append(ref)
            pos = span.end
        out.append(markdown[pos:])
        return "".join(out)

    def place(self, doc: QTextDocument, found: dict[str, tuple[QImage, bool]]) -> None:
        """After setMarkdown: the images into the document, inline math on the baseline,
        display math centred."""
        if not found:
            return
        for name, (image, _display) in found.items():
            doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), image)
        block = doc.begin()
        while block.isValid():
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                fmt = fragment.charFormat()
                if fmt.isImageFormat() and fmt.toImageFormat().name() in found:
                    cursor = QTextCursor(doc)
                    cursor.setPosition(fragment.position())
                    cursor.setPosition(fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor)
                    middle = QTextCharFormat()
                    middle.setVerticalAlignment(QTextCharFormat.VerticalAlignment.AlignMiddle)
                    cursor.mergeCharFormat(middle)
                    if found[fmt.toImageFormat().name()][1] and block.text().strip() == "\ufffc":
                        centred = QTextBlockFormat()
                        centred.setAlignment(Qt.AlignmentFlag.AlignHCenter)
                        cursor.mergeBlockFormat(centred)
                it += 1
            block = block.next()


@lru_cache(maxsize=1)
def math_images() -> MathImages:
    """The process's one cache of rendered formulas."""
    return MathImages()


def _pixel_ratio() -> float:
    app = QGuiApplication.instance()
    return float(app.devicePixelRatio()) if isinstance(app, QGuiApplication) else 1.0


def _image(mask: latex.MathMask | None, color: QColor, half_x: float, scale: float) -> QImage | None:
    """The mask in colour, padded so that Qt's AlignMiddle (which centres an inline image
    half an x-height above the baseline) puts the formula's own baseline on the text's."""
    if mask is None:
        return None
    above, below = mask.height - mask.depth, mask.depth
    pad = int(round((above - below) - half_x))  # > 0: pad below, < 0: pad above
    height = mask.height + abs(pad)
    top = -pad if pad < 0 else 0
    rgba = np.zeros((height, mask.width, 4), dtype=np.uint8)
    rgba[..., 0], rgba[..., 1], rgba[..., 2] = color.red(), color.green(), color.blue()
    rgba[top:top + mask.height, :, 3] = mask.alpha
    image = QImage(rgba.data, mask.width, height, 4 * mask.width, QImage.Format.Format_RGBA8888).copy()
    image.setDevicePixelRatio(scale)
    return image


def _code(source: str) -> str:
    fence = "``" if "`" in source else "`"
    return f"{fence}{source}{fence}"


def _alone_on_its_lines(text: str, start: int, end: int) -> bool:
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    return not text[line_start:start].strip() and not text[end:line_end if line_end >= 0 else len(text)].strip()


def _paragraph(text: str, start: int, end: int, ref: str) -> str:
    """ref as a paragraph of its own: a blank line before and after it where there is none."""
    before = text[:start].rstrip(" \t")
    after = text[end:].lstrip(" \t")
    lead = "" if not before or before.endswith("\n\n") else "\n" if before.endswith("\n") else "\n\n"
    trail = "" if not after or after.startswith("\n\n") else "\n" if after.startswith("\n") else "\n\n"
    return f"{lead}{ref}{trail}"
