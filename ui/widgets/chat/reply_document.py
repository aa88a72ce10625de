"""A message's content as the bubble lays it out: its Markdown in a QTextDocument, with a
reply's reasoning (app/chats/reasoning.py) as a block above the answer whose first line,
"▾ Thought for N s", opens and closes it (open while the model thinks, closed once the reply
has finished), LaTeX math as images (math_images.py) and coloured code blocks
(code_highlight.py).

The message's text itself is never changed: copying a message copies what the model wrote,
reasoning markers included."""

from __future__ import annotations

import json
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
from ui.widgets.chat.message_model import MessageView, ToolCard

REASONING_INDENT = 14  # the reasoning's left margin, under its header's arrow
HAS_REASONING = "chorus_reasoning"  # the document property that says its first block is the header


@dataclass(frozen=True, slots=True)
class DocumentStyle:
    font: QFont
    text: QColor
    link: QColor
    dim: QColor  # the reasoning's text


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
    if view.tool is not None:
        return _tool_document(doc, view.tool, width, style, expanded)
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


def tool_header(card: ToolCard, expanded: bool) -> str:
    arrow = "▾" if expanded else "▸"
    return " · ".join(p for p in (f"{arrow} {card.name}", card.state) if p)


def _tool_document(doc: QTextDocument, card: ToolCard, width: int, style: DocumentStyle,
                   expanded: bool) -> QTextDocument:
    """A tool's card: its name and how the call went on the first line (a click opens it),
    then the call's arguments and the result as the model read it."""
    parts = [_escaped(tool_header(card, expanded))]
    if expanded:
        failed = card.state.startswith("error")  # labelled as what it is, never "code"
        parts += ["**Arguments**", _fenced(_pretty_json(card.arguments), "json"), "**Result**",
                  _fenced(card.result or "(empty)", "error" if failed else "result")]
    doc.setMarkdown("\n\n".join(parts))
    doc.setProperty(HAS_REASONING, True)  # the first line opens and closes it, as a reasoning block's
    header = QTextCharFormat()
    header.setForeground(style.link)
    _whole_block(doc.begin()).mergeCharFormat(header)
    highlight_code_blocks(doc, dark=style.text.lightness() > 128)
    doc.setTextWidth(max(50, width))
    return doc


def calls_markdown(calls: tuple[tuple[str, str], ...]) -> str:
    """An assistant turn's tool calls, each on a line of its own."""
    return "\n\n".join(f"Calls **{_escaped(name)}** `{arguments}`" for name, arguments in calls)


def _pretty_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _fenced(text: str, language: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text}\n{fence}"


def _escaped(text: str) -> str:
    return "".join("\\" + c if c in "\\`*_[]<>#" else c for c in text)


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
