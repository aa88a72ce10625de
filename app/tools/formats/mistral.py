"""Mistral's format: [TOOL_CALLS] then a JSON list of {"name", "arguments", "id"} (Nemo,
Small 3), or, newer (Ministral 3, Magistral, Devstral 2), [TOOL_CALLS]name[ARGS]{...} per
call. [TOOL_CALLS] and [ARGS] are control tokens, so the reply's text may lack them. The
template wants call ids of 9 letters or digits: the history's are mapped to such, the same
each time (so a follow-up turn's prompt starts as the last one did). Recorded outputs:
llama.cpp's tests/test-chat.cpp (MISTRAL_NEMO, Ministral 3)."""

from __future__ import annotations

import hashlib
import re

from app.chats.reasoning import split_reasoning
from app.tools.formats.base import JSON, ToolFormat, all_calls, call_schema, checked_call, json_values, wrapped_grammar
from app.tools.types import ToolCall, ToolUse

TAG, ARGS = "[TOOL_CALLS]", "[ARGS]"
NAMED = re.compile(r"\s*(?:\[TOOL_CALLS\])?\s*([A-Za-z0-9_-]+)\s*(?:\[ARGS\])?\s*(?=\{)")


class MistralFormat(ToolFormat):
    name = "mistral"

    def detects(self, source: str) -> bool:
        return TAG in source

    def parse(self, text: str, use: ToolUse) -> tuple[ToolCall, ...] | None:
        answer = split_reasoning(text).answer.strip()
        listed = _listed(answer.removeprefix(TAG).strip(), use)
        return listed if listed is not None else _named(answer, use)

    def might_be_call(self, text: str) -> bool:
        start = text.lstrip()
        return not start or start[0] in "[{" or TAG.startswith(start[:len(TAG)])

    def grammar(self, use: ToolUse) -> str:
        """The JSON list alone: [TOOL_CALLS] is a control token, which the grammar does not write."""
        return wrapped_grammar(use, call_schema, joiner=", ", opening="[", closing="]")

    def template_messages(self, messages: list[dict]) -> list[dict]:
        out = []
        for m in super().template_messages(messages):
            if m.get("tool_calls"):
                m = {**m, "tool_calls": [{**c, "id": short_id(c.get("id", ""))} for c in m["tool_calls"]]}
            if m.get("role") == "tool":
                m = {**m, "tool_call_id": short_id(str(m.get("tool_call_id", "")))}
            out.append(m)
        return out


def short_id(call_id: str) -> str:
    if len(call_id) == 9 and call_id.isalnum():
        return call_id
    return hashlib.sha256(call_id.encode()).hexdigest()[:9]


def _listed(text: str, use: ToolUse) -> tuple[ToolCall, ...] | None:
    values = json_values(text)
    if not values or len(values) != 1:
        return None
    items = values[0] if isinstance(values[0], list) else [values[0]]
    calls = [checked_call(i.get("name"), i.get("arguments", {}), use) if isinstance(i, dict) else None
             for i in items]
    return all_calls(calls, use)


def _named(text: str, use: ToolUse) -> tuple[ToolCall, ...] | None:
    """[TOOL_CALLS]name[ARGS]{...}, once or more."""
    calls: list[ToolCall | None] = []
    pos = 0
    while pos < len(text):
        head = NAMED.match(text, pos)
        if head is None:
            return None
        try:
            arguments, pos = JSON.raw_decode(text, head.end())
        except ValueError:
            return None
        calls.append(checked_call(head.group(1), arguments, use))
        while pos < len(text) and text[pos].isspace():
            pos += 1
    return all_calls(calls, use)
