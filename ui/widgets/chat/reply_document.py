"""A message's content as the bubble lays it out: its Markdown in a QTextDocument, with a
reply's reasoning (app/chats/reasoning.py) as a block above the answer whose first line,
"▾ Thought for N s", opens and closes it (open while the model thinks, closed once the reply
has finished), LaTeX math as images (math_images.py) and coloured code blocks
(code_highlight.py).

The message's text itself is never changed: copying a message copies what the model wrote,
reasoning markers included."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QRectF
from PySide6.QtGui import (
    QColor,
    QFont,
    QImage,
    QTextBlockFormat,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)

from app.chats.reasoning import Split, split_reasoning
from ui.widgets.chat.code_highlight import highlight_code_blocks
from ui.widgets.chat.math_images import math_images
from ui.widgets.chat.message_model import MessageView

REASONING_INDENT = 14  # the reasoning's left margin, under its header's arrow
HAS_REASONING = "chorus_reasoning"  # the document property that says its first block is the header


@dataclass(frozen=True, slots=True)
class DocumentStyle:
    font: QFont
    text: QColor
    link: QColor
    dim: QColor  # the reasoning's text


def markdown_of(view: MessageView) -> str:
    """The Markdown a bubble renders. A user's line breaks (Shift+Enter) are hard breaks:
    Markdown joins single lines into one paragraph. Lines inside code fences stay as typed."""
    text = view.text or " "
    if view.role != "user":
        return text
    lines, in_code = text.split("\n"), False
    for i, line in enumerate(lines[:-1]):
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and line.strip() and lines[i + 1].strip() and not lines[i + 1].lstrip().startswith("```"):
            lines[i] = line + "\\"  # a backslash at the end: CommonMark's hard line break
    return "\n".join(lines)


def reply_split(view: MessageView) -> Split | None:
    """A reply's reasoning and answer; None for a message without reasoning."""
    if view.role != "assistant":
        return None
    split = split_reasoning(view.text)
    return split if split.reasoning is not None else None


def reasoning_label(view: MessageView, split: Split) -> str:
    if split.open and view.status in ("streaming", "queued", "prefilling"):
        return "Thinking…"
    if view.thought_s is not None:
        return f"Thought for {max(1, round(view.thought_s))} s"
    return "Thought"


def default_expanded(view: MessageView) -> bool:
    """Open while the reply is written (the reasoning is live), closed once it has finished."""
    return view.status in ("streaming", "queued", "prefilling")


def build_document(view: MessageView, markdown: str, width: int, style: DocumentStyle,
                   expanded: bool, style_sheet: str = "") -> QTextDocument:
    """markdown: the message's own Markdown (markdown_of), for a message without reasoning."""
    doc = QTextDocument()
    doc.setDefaultFont(style.font)
    doc.setDefaultStyleSheet(style_sheet)
    split = reply_split(view)
    math = math_images()
    formulas: dict[str, tuple[QImage, bool]] = {}
    if split is None:
        doc.setMarkdown(math.with_math(markdown, style.text, style.font, formulas))
    else:
        arrow = "▾" if expanded else "▸"
        parts = [f"{arrow} {reasoning_label(view, split)}"]
        if expanded and split.reasoning:
            parts.append(_quoted(math.with_math(split.reasoning, style.dim, style.font, formulas)))
        if split.answer.startswith(">"):
            parts.append("\u200b")  # else the answer's quote would join the reasoning's
        parts.append(math.with_math(split.answer, style.text, style.font, formulas))
        doc.setMarkdown("\n\n".join(p for p in parts if p))
        doc.setProperty(HAS_REASONING, True)
        _style_reasoning(doc, style)
    math.place(doc, formulas)
    highlight_code_blocks(doc, dark=style.text.lightness() > 128)
    doc.setTextWidth(max(50, width))
    return doc


def _quoted(text: str) -> str:
    return "\n".join(f"> {line}" if line else ">" for line in text.split("\n"))


def _style_reasoning(doc: QTextDocument, style: DocumentStyle) -> None:
    header = QTextCharFormat()
    header.setForeground(style.link)
    _whole_block(doc.begin()).mergeCharFormat(header)
    dim = QTextCharFormat()
    dim.setForeground(style.dim)
    margins = QTextBlockFormat()
    margins.setLeftMargin(REASONING_INDENT)
    margins.setRightMargin(0)
    block = doc.begin().next()
    while block.isValid() and block.blockFormat().property(QTextFormat.Property.BlockQuoteLevel):
        cursor = _whole_block(block)
        cursor.mergeBlockFormat(margins)
        cursor.mergeCharFormat(dim)
        block = block.next()


def _whole_block(block) -> QTextCursor:
    cursor = QTextCursor(block)
    cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
    return cursor


def reasoning_header(doc: QTextDocument) -> QRectF | None:
    """The "Thought for N s" line (document coordinates) of a reply with reasoning."""
    if not doc.property(HAS_REASONING):
        return None
    return doc.documentLayout().blockBoundingRect(doc.begin())


def reasoning_span(doc: QTextDocument) -> QRectF | None:
    """Where the open reasoning's text lies (document coordinates): the delegate draws a
    rule at its left."""
    if not doc.property(HAS_REASONING):
        return None
    layout, span = doc.documentLayout(), QRectF()
    block = doc.begin().next()
    while block.isValid() and block.blockFormat().property(QTextFormat.Property.BlockQuoteLevel):
        span = span.united(layout.blockBoundingRect(block))
        block = block.next()
    return span if not span.isEmpty() else None
