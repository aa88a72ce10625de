"""Hermes' format, also Qwen 2.5's and Qwen 3's: each call a JSON object {"name",
"arguments"} between <tool_call> and </tool_call> lines; results in <tool_response>.
Recorded outputs: llama.cpp's tests/test-chat.cpp (COMMON_CHAT_FORMAT_HERMES_2_PRO)."""

from __future__ import annotations

import re

from app.chats.reasoning import split_reasoning
from app.tools.formats.base import ToolFormat, all_calls, call_schema, checked_call, json_values, wrapped_grammar
from app.tools.types import ToolCall, ToolUse

OPEN, CLOSE = "<tool_call>", "</tool_call>"
BLOCK = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


class HermesFormat(ToolFormat):
    name = "hermes"

    def detects(self, source: str) -> bool:
        return OPEN in source

    def parse(self, text: str, use: ToolUse) -> tuple[ToolCall, ...] | None:
        """Only blocks and whitespace (prose around them is text: a stream could not take back
        what it already sent). A block that is no valid call makes the whole reply text."""
        answer = split_reasoning(text).answer
        if not answer.lstrip().startswith(OPEN) or BLOCK.sub("", answer).strip():
            return None
        return all_calls([_call(block, use) for block in BLOCK.findall(answer)], use)

    def might_be_call(self, text: str) -> bool:
        start = text.lstrip()
        return OPEN.startswith(start) or start.startswith(OPEN)

    def grammar(self, use: ToolUse) -> str:
        return wrapped_grammar(use, call_schema, OPEN + "\n", "\n" + CLOSE, joiner="\n")


def _call(block: str, use: ToolUse) -> ToolCall | None:
    values = json_values(block)
    item = values[0] if values is not None and len(values) == 1 else None
    return checked_call(item.get("name"), item.get("arguments", {}), use) if isinstance(item, dict) else None
