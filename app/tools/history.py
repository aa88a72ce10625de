"""Tool use between the chat history and the loop: stored messages (storage's records) as
the loop's messages in OpenAI's shape, and a turn's calls and a call's result as what
storage keeps of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from app.tools.types import ToolCall
from storage import MessageRecord, ToolCallRecord, ToolResultRecord

if TYPE_CHECKING:  # the MCP SDK's types are imported only where a call runs
    from app.tools.mcp_results import ToolResult


def chat_message(m: MessageRecord, content: str | None = None) -> dict:
    """A stored message as the loop (and agent.plain_turns) reads it; content: its text, if
    the caller changed it (a reply's reasoning left out)."""
    text = m.content if content is None else content
    if m.tool_calls:
        return {"role": "assistant", "content": text,
                "tool_calls": [ToolCall(c.id, c.name, c.arguments).openai() for c in m.tool_calls]}
    if m.tool_result is not None:
        return {"role": "tool", "tool_call_id": m.tool_result.call_id, "content": text}
    return {"role": m.role, "content": text}


def call_records(calls: Sequence[ToolCall]) -> tuple[ToolCallRecord, ...]:
    return tuple(ToolCallRecord(c.id, c.name, c.arguments) for c in calls)


def result_record(call: ToolCall, result: ToolResult, denied: bool = False) -> ToolResultRecord:
    return ToolResultRecord(call.id, call.name, result.is_error, denied, round(result.duration_s, 3), result.cut_chars)
