"""Hermes' format, also Qwen 2.5's and Qwen 3's: each call a JSON object {"name",
"arguments"} between <tool_call> and </tool_call> lines; results in <tool_response>.
Prose may come before the first block ("Let me look that up.", as llama.cpp's parser reads
it): shown as the reply's text, the calls after it. Recorded outputs: llama.cpp's
tests/test-chat.cpp (COMMON_CHAT_FORMAT_HERMES_2_PRO)."""

from __future__ import annotations

import re

from app.chats.reasoning import answer_start
from app.tools.formats.base import ToolFormat, all_calls, call_schema, checked_call, json_values, wrapped_grammar
from app.tools.types import ToolCall, ToolUse

OPEN, CLOSE = "<tool_call>", "</tool_call>"
BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


class HermesFormat(ToolFormat):
    name = "hermes"

    def detects(self, source: str) -> bool:
        return OPEN in source

    def parse(self, text: str, use: ToolUse) -> tuple[ToolCall, ...] | None:
        found = self.split(text, use)
        return found[1] if found is not None else None

    def split(self, text: str, use: ToolUse) -> tuple[str, tuple[ToolCall, ...]] | None:
        """Prose, then only blocks and white space (prose after them is no call: the reply is
        text). A block that is no valid call makes the whole reply text."""
        start = self.call_start(text)
        if start is None:
            return None
        blocks = text[start:]
        if not blocks.startswith(OPEN) or BLOCK.sub("", blocks).strip():
            return None
        calls = all_calls([_call(block, use) for block in BLOCK.findall(blocks)], use)
        return (text[:start].rstrip(), calls) if calls else None

    def call_start(self, text: str) -> int | None:
        """The first <tool_call> of the answer (its reasoning is no call), or an opening of one
        cut at the end of the text so far ("<tool_"), or the answer's start while it is
        white space yet."""
        begin = answer_start(text)
        if begin is None:
            return None
        if not text[begin:].strip():
            return begin
        at = text.find(OPEN, begin)
        if at >= 0:
            return at
        return next((i for i in range(max(begin, len(text) - len(OPEN) + 1), len(text))
                     if OPEN.startswith(text[i:])), None)

    def might_be_call(self, text: str) -> bool:
        start = text.lstrip()
        return OPEN.startswith(start) or start.startswith(OPEN)

    def grammar(self, use: ToolUse) -> str:
        return wrapped_grammar(use, call_schema, OPEN + "\n", "\n" + CLOSE, joiner="\n")


def _call(block: str, use: ToolUse) -> ToolCall | None:
    values = json_values(block)
    item = values[0] if values is not None and len(values) == 1 else None
    return checked_call(item.get("name"), item.get("arguments", {}), use) if isinstance(item, dict) else None

