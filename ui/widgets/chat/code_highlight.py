"""The fenced code blocks of a Markdown QTextDocument: coloured (keywords, strings, comments
and numbers, for the common C-like and scripting languages), wrapped at the bubble's width
instead of clipped, each with room above it for a toolbar (its language and Copy) that the
message delegate paints and hit-tests."""

from __future__ import annotations

import re
from dataclasses import dataclass

from PySide6.QtGui import QColor, QFont, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument, QTextFormat

KEYWORDS = (
    "and as assert async await break case catch class const continue def del elif else enum "
    "except export extends false False finally fn for from func function if impl import in "
    "interface is lambda let match mut new nil None not null or package pass private pub "
    "public raise return self static struct super switch this throw true True try type "
    "typeof use var void while with yield"
).split()
RULES = (
    ("comment", re.compile(r"(#|//).*$")),
    ("string", re.compile(r"\"(?:\\.|[^\"\\])*\"|'(?:\\.|[^'\\])*'")),
    ("number", re.compile(r"\b\d+(?:\.\d+)?\b")),
    ("keyword", re.compile(r"\b(?:" + "|".join(map(re.escape, KEYWORDS)) + r")\b")),
)
# "bg" is a step away from both themes' assistant bubbles, so a code block shows as a box.
COLORS = {
    False: {"keyword": "#0b57d0", "string": "#188038", "comment": "#6b7280", "number": "#b45309", "bg": "#dfe3e8"},
    True: {"keyword": "#8ab4f8", "string": "#81c995", "comment": "#9aa0a6", "number": "#fdd663", "bg": "#0f1115"},
}
TOOLBAR_H = 20  # the room above each code block for its language and Copy
# Blocks shown as they are, never coloured as code: a tool's result and its error (issue 39,
# defect 13: an error's quoted words came out as a string literal).
PLAIN_BLOCKS = ("result", "error", "text")
ERROR_COLORS = {False: "#c5221f", True: "#f28b82"}  # an error's text: red, readable on each code box


@dataclass(frozen=True, slots=True)
class CodeBlock:
    first_block: int  # number of its first QTextBlock in the document
    language: str
    code: str


def code_blocks_of(doc: QTextDocument) -> list[CodeBlock]:
    """The document's fenced code blocks, in order (consecutive code lines make one block)."""
    found: list[CodeBlock] = []
    block = doc.begin()
    while block.isValid():
        if not is_code(block):
            block = block.next()
            continue
        first, language = block.blockNumber(), _language(block)
        lines: list[str] = []
        # A run of code lines is one block; highlight_code_blocks gave each first line a margin.
        while block.isValid() and is_code(block) and (not lines or block.blockFormat().topMargin() < TOOLBAR_H):
            lines.append(block.text())
            block = block.next()
        found.append(CodeBlock(first, language, "\n".join(lines)))
    return found


def _language(block) -> str:
    return str(block.blockFormat().property(QTextFormat.Property.BlockCodeLanguage) or "")



def is_code(block) -> bool:
    fmt = block.blockFormat()
    return fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.hasProperty(
        QTextFormat.Property.BlockCodeLanguage
    )


def highlight_code_blocks(doc: QTextDocument, dark: bool) -> int:
    """Colours, wraps and makes room for a toolbar above every code block; returns how many
    code lines were coloured."""
    colors = COLORS[dark]
    formats = {name: _format(colors[name], italic=name == "comment", bold=name == "keyword") for name, _ in RULES}
    code_line = QTextBlockFormat()
    code_line.setBackground(QColor(colors["bg"]))
    code_line.setNonBreakableLines(False)  # long lines wrap inside the bubble, never clipped
    lines = 0
    block = doc.begin()
    while block.isValid():
        if is_code(block):
            lines += 1
            cursor = QTextCursor(block)
            starts = not is_code(block.previous()) if block.previous().isValid() else True
            fmt = QTextBlockFormat(code_line)
            if starts:
                fmt.setTopMargin(TOOLBAR_H)
            cursor.mergeBlockFormat(fmt)
            language = _language(block)
            if language == "error":
                _colour_whole(block, _format(ERROR_COLORS[dark]))
            elif language not in PLAIN_BLOCKS:
                _colour_line(block, formats)
        block = block.next()
    if is_code(doc.begin()):
        # Qt lays the first block out at the frame's top without its top margin: a reply that
        # opens with code gets the room for its toolbar from the frame instead.
        frame = doc.rootFrame().frameFormat()
        frame.setTopMargin(doc.documentMargin() + TOOLBAR_H)
        doc.rootFrame().setFrameFormat(frame)
    return lines


def _colour_line(block, formats: dict[str, QTextCharFormat]) -> None:
    text = block.text()
    taken = [False] * len(text)
    for name, pattern in RULES:  # earlier rules win: no keywords inside comments or strings
        for match in pattern.finditer(text):
            start, end = match.span()
            if any(taken[start:end]):
                continue
            taken[start:end] = [True] * (end - start)
            cursor = QTextCursor(block)
            cursor.setPosition(block.position() + start)
            cursor.setPosition(block.position() + end, QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(formats[name])


def _colour_whole(block, fmt: QTextCharFormat) -> None:
    cursor = QTextCursor(block)
    cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
    cursor.mergeCharFormat(fmt)


def _format(color: str, italic: bool = False, bold: bool = False) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(color))
    fmt.setFontItalic(italic)
    if bold:
        fmt.setFontWeight(QFont.Weight.Bold)
    return fmt


def code_style_sheet(text: QColor, link: QColor) -> str:
    """Code needs a box that shows on both themes' bubbles: a translucent grey vanished on
    dark ones, so code gets an opaque background a step away from the bubble's."""
    dark = text.lightness() > 128
    code_bg = COLORS[dark]["bg"]
    return (
        f"body {{ color: {text.name()}; }} "
        f"a {{ color: {link.name()}; }} "
        f"pre, code {{ font-family: monospace; background-color: {code_bg}; }}"
    )
