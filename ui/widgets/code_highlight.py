"""Colours the fenced code blocks of a Markdown QTextDocument: keywords, strings,
comments and numbers, for the common C-like and scripting languages."""

from __future__ import annotations

import re

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
COLORS = {
    False: {"keyword": "#0b57d0", "string": "#188038", "comment": "#6b7280", "number": "#b45309", "bg": "#f1f3f5"},
    True: {"keyword": "#8ab4f8", "string": "#81c995", "comment": "#9aa0a6", "number": "#fdd663", "bg": "#2b2d31"},
}


def is_code(block) -> bool:
    fmt = block.blockFormat()
    return fmt.hasProperty(QTextFormat.Property.BlockCodeFence) or fmt.hasProperty(
        QTextFormat.Property.BlockCodeLanguage
    )


def highlight_code_blocks(doc: QTextDocument, dark: bool) -> int:
    """Returns how many code lines were coloured."""
    colors = COLORS[dark]
    formats = {name: _format(colors[name], italic=name == "comment", bold=name == "keyword") for name, _ in RULES}
    background = QTextBlockFormat()
    background.setBackground(QColor(colors["bg"]))
    lines = 0
    block = doc.begin()
    while block.isValid():
        if is_code(block):
            lines += 1
            cursor = QTextCursor(block)
            cursor.mergeBlockFormat(background)
            _colour_line(block, formats)
        block = block.next()
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


def _format(color: str, italic: bool = False, bold: bool = False) -> QTextCharFormat:
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(color))
    fmt.setFontItalic(italic)
    if bold:
        fmt.setFontWeight(QFont.Weight.Bold)
    return fmt
