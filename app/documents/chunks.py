"""A document's text cut into chunks for retrieval: at every heading and page boundary,
paragraphs packed up to about target_chars each, an over-long paragraph cut at a line, a
sentence or a space. The chunks cover the text exactly: no gaps, no overlaps."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise

from storage import ChunkSpan

# An ATX heading (CommonMark: up to 3 spaces, 1-6 #, a space, the title, optional closing #s)
# or a code fence, whose lines hold no headings ("# comment" in a Python block).
_HEADING_OR_FENCE = re.compile(
    r"^ {0,3}(?:(?P<fence>```|~~~)|(?P<level>#{1,6})[ \t]+(?P<title>[^\n]*?\S)?(?:[ \t]+#+)?[ \t\r]*$)",
    re.MULTILINE,
)
# A blank line (or more) between paragraphs; the next paragraph starts where it ends.
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")
_SENTENCE_END = re.compile(r"[.!?…][\"')\]]*\s+")
_SPACE = re.compile(r"\s+")
# What the model reads as nothing: blank space and HTML comments (markitdown marks slides so).
_BLANK = re.compile(r"(?:\s|<!--.*?-->)*", re.DOTALL)


@dataclass(frozen=True, slots=True)
class _Heading:
    start: int
    path: str  # its title after those of the headings it is under: "Install › Linux"


PATH_SEPARATOR = " › "
# A Markdown table's line, and the line under its header row ("| --- | :-: |").
_TABLE_LINE = re.compile(r"^ {0,3}\|", re.MULTILINE)
_TABLE_RULE = re.compile(r"^ {0,3}\|(?:\s*:?-+:?\s*\|)+\s*$", re.MULTILINE)


def split_chunks(text: str, page_starts: Sequence[int] = (), target_chars: int = 1200, *,
                 markdown_headings: bool = True, table_rows: bool = False) -> tuple[ChunkSpan, ...]:
    """Chunks of text. page_starts: the offset where each page begins (the first 0), or none
    for a format without pages. markdown_headings: "# Title" lines are headings (Markdown),
    not comments (code, YAML). A chunk's heading is where it is in words a reader follows:
    the path of headings above it, and with table_rows (a workbook: a heading per sheet, its
    table under it, the first line row 1) the sheet's rows it holds: "Sales, rows 12–40"."""
    if target_chars < 1:
        raise ValueError(f"target_chars must be at least 1, not {target_chars}")
    _check_page_starts(page_starts, len(text))
    if not text:
        return ()
    headings = _headings(text) if markdown_headings else []
    hard = sorted({0, len(text), *(p for p in page_starts if p < len(text)), *(h.start for h in headings)})
    paragraph_starts = [match.end() for match in _PARAGRAPH_BREAK.finditer(text)]
    spans = [span for a, b in pairwise(hard) for span in _pack(text, a, b, paragraph_starts, target_chars)]
    heading_starts = [h.start for h in headings]
    chunks = []
    for start, end in _absorb_blank(text, spans):
        # A chunk's page and heading are those of its first words, not of the blank before them.
        content = _content_start(text, start, end)
        heading = _heading_at(headings, heading_starts, content)
        where = heading.path if heading is not None else ""
        if table_rows:
            where = _with_rows(text, where, heading.start if heading is not None else 0, content, end)
        chunks.append(ChunkSpan(start, end, _page_at(page_starts, content), where))
    return tuple(chunks)


def _check_page_starts(page_starts: Sequence[int], length: int) -> None:
    if not page_starts:
        return
    if page_starts[0] != 0:
        raise ValueError(f"the first page must start at 0, not {page_starts[0]}")
    if any(b < a for a, b in pairwise(page_starts)) or page_starts[-1] > length:
        raise ValueError("page starts must ascend and lie within the text")


def _headings(text: str) -> list[_Heading]:
    found: list[_Heading] = []
    fence: str | None = None
    above: list[tuple[int, str]] = []  # (level, title) of the headings the next one may be under
    for match in _HEADING_OR_FENCE.finditer(text):
        marker = match.group("fence")
        if marker is not None:
            fence = None if fence == marker else (fence or marker)
        elif fence is None:
            level = len(match.group("level"))
            above = [(lvl, title) for lvl, title in above if lvl < level]
            above.append((level, (match.group("title") or "").strip()))
            found.append(_Heading(match.start(), PATH_SEPARATOR.join(title for _, title in above if title)))
    return found


def _pack(text: str, start: int, end: int, paragraph_starts: list[int], target: int) -> Iterator[tuple[int, int]]:
    """Spans covering text[start:end], each as many whole paragraphs as fit in target."""
    while end - start > target:
        limit = start + target
        last_fitting = bisect_right(paragraph_starts, limit) - 1
        if last_fitting >= 0 and paragraph_starts[last_fitting] > start \
                and not _only_a_heading(text, start, paragraph_starts[last_fitting]):
            cut = paragraph_starts[last_fitting]
        else:  # a heading stays with the words under it: a chunk of a title alone says nothing
            cut = _cut_inside_paragraph(text, start, limit)
        yield start, cut
        start = cut
    yield start, end


def _only_a_heading(text: str, start: int, end: int) -> bool:
    match = _HEADING_OR_FENCE.match(text, start)
    return match is not None and match.group("fence") is None and not text[match.end():end].strip()


def _cut_inside_paragraph(text: str, start: int, limit: int) -> int:
    """Where to end a chunk of one paragraph longer than the target: after the last line
    break, else sentence, else space, in the second half of the window; mid-word only for a
    word longer than the whole window."""
    half = start + (limit - start) // 2
    newline = text.rfind("\n", half, limit)
    if newline >= 0:
        return newline + 1
    for pattern, lowest in ((_SENTENCE_END, half), (_SPACE, half), (_SPACE, start + 1)):
        last = deque(pattern.finditer(text, lowest, limit), maxlen=1)
        if last:
            return last[0].end()
    return limit


def _absorb_blank(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Blank spans (an empty page, a slide's number mark before its title) joined to the
    chunk after them, or before them at the end: a chunk of nothing would only waste a
    search hit."""
    merged: list[tuple[int, int]] = []
    waiting: int | None = None  # where blank spans began that wait for the next chunk
    for start, end in spans:
        if _content_start(text, start, end) < end:
            merged.append((start if waiting is None else waiting, end))
            waiting = None
        elif waiting is None:
            waiting = start
    if waiting is not None:
        merged[-1:] = [(merged[-1][0] if merged else waiting, len(text))]
    return merged


def _content_start(text: str, start: int, end: int) -> int:
    """The first offset in text[start:end] past blank space and HTML comments."""
    match = _BLANK.match(text, start, end)
    return match.end() if match else start


def _page_at(page_starts: Sequence[int], offset: int) -> int | None:
    return bisect_right(page_starts, offset) if page_starts else None


def _heading_at(headings: list[_Heading], heading_starts: list[int], offset: int) -> _Heading | None:
    """The last heading at or before offset (None before the first)."""
    index = bisect_right(heading_starts, offset) - 1
    return headings[index] if index >= 0 else None


def _with_rows(text: str, where: str, section: int, start: int, end: int) -> str:
    """where, and the table rows text[start:end] holds, counted from its section's start
    (the header row is row 1, as a spreadsheet numbers it; the rule under it no row)."""
    before = _table_rows(text, section, start)
    held = _table_rows(text, start, end)
    if not held:
        return where
    first, last = before + 1, before + held
    rows = f"row {first}" if first == last else f"rows {first}–{last}"
    return f"{where}, {rows}" if where else rows


def _table_rows(text: str, start: int, end: int) -> int:
    return len(_TABLE_LINE.findall(text, start, end)) - len(_TABLE_RULE.findall(text, start, end))
