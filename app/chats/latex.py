"""LaTeX math in a reply: where it is (`$…$` and `\\(…\\)` inline, `$$…$$` and `\\[…\\]`
display, never inside code), and its rendering with matplotlib's mathtext into an alpha mask
that the view colours and shows as an image. No Qt here.

A `$` opens math only when a non-space follows it and closes it only after a non-space and
before anything but a digit (Pandoc's rule), so "$5 and $10" stays prose. Rendering starts
with importing matplotlib and loading its fonts (about a second, once): `warm_up()` does it
off the GUI thread, and `ready()` says when `render` is quick (a few ms a formula, each
rendered once: the results are cached).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

_MATH = re.compile(
    r"""(?<!\\)\$\$(?P<d1>.+?)\$\$
      | (?<!\\)\\\[(?P<d2>.+?)\\\]
      | (?<!\\)\\\((?P<i1>.+?)\\\)
      | (?<![\\$])\$(?P<i2>[^\s$](?:[^$\n]|\n(?![ \t]*\n))*?)(?<![\s\\])\$(?!\d)""",
    re.S | re.X,
)
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?(?:^[ \t]*\1[ \t]*$|\Z)", re.S | re.M)
_CODE_SPAN = re.compile(r"(`+)(?!`).+?(?<!`)\1(?!`)", re.S)


@dataclass(frozen=True, slots=True)
class MathSpan:
    start: int
    end: int
    source: str  # the LaTeX between the delimiters
    display: bool


def math_spans(text: str) -> list[MathSpan]:
    """The math in a Markdown text, in order, outside fenced code and code spans."""
    if "$" not in text and "\\(" not in text and "\\[" not in text:
        return []
    code = [m.span() for m in _FENCE.finditer(text)]
    code += [m.span() for m in _CODE_SPAN.finditer(text) if not _inside(m.start(), code)]
    spans, pos = [], 0
    while (m := _MATH.search(text, pos)) is not None:
        clash = next(((a, b) for a, b in code if a < m.end() and m.start() < b), None)
        if clash is not None:
            pos = max(m.start() + 1, clash[1]) if clash[0] <= m.start() else m.start() + 1
            continue
        name = next(g for g in ("d1", "d2", "i1", "i2") if m.group(g) is not None)
        source = m.group(name).strip()
        if source:
            spans.append(MathSpan(m.start(), m.end(), source, display=name.startswith("d")))
        pos = m.end()
    return spans


def _inside(at: int, ranges: list[tuple[int, int]]) -> bool:
    return any(a <= at < b for a, b in ranges)


# ----- rendering ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MathMask:
    """A rendered formula: coverage 0-255 per pixel (rows top down), and how many of its
    rows lie below the math's baseline."""

    alpha: np.ndarray  # uint8, (height, width)
    depth: int

    @property
    def height(self) -> int:
        return int(self.alpha.shape[0])

    @property
    def width(self) -> int:
        return int(self.alpha.shape[1])


_state = {"ready": False, "started": False}
_lock = threading.Lock()


def ready() -> bool:
    return _state["ready"]


def warm_up(done: Callable[[], None] | None = None) -> None:
    """Import matplotlib and render once on a daemon thread, then call done (on that thread).
    Later calls do nothing."""
    with _lock:
        if _state["started"]:
            return
        _state["started"] = True

    def work() -> None:
        try:
            render("x", 10.0)
        finally:
            _state["ready"] = True
            if done is not None:
                done()

    threading.Thread(target=work, name="mathtext warm-up", daemon=True).start()


@lru_cache(maxsize=1)
def _parser():
    from matplotlib.mathtext import MathTextParser

    return MathTextParser("agg")


@lru_cache(maxsize=8)
def _font(size: float):
    from matplotlib.font_manager import FontProperties

    return FontProperties(size=size)


@lru_cache(maxsize=1024)
def render(source: str, size_px: float, scale: float = 1.0) -> MathMask | None:
    """source at size_px (the text's pixel size) times scale (the screen's pixel ratio);
    None when mathtext cannot read it (an unknown command, unbalanced braces), and the
    view shows the source instead."""
    try:
        parsed = _parser().parse(f"${source}$", dpi=72 * scale, prop=_font(size_px))
    except (ValueError, ImportError):  # not mathtext's LaTeX; no matplotlib
        return None
    alpha = np.asarray(parsed.image, dtype=np.uint8)
    if alpha.size == 0:
        return None
    return MathMask(np.ascontiguousarray(alpha), int(round(parsed.depth)))
