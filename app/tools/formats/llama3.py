"""Llama 3.1/3.2/3.3's format: a call is the JSON object {"name", "parameters"} alone
(one call a turn: the template refuses more), or, for its built-in tools, <|python_tag|>
then name.call(arg="value", ...). <|python_tag|> is a control token, so the reply's text
may lack it. Results are "ipython" turns. Recorded outputs: llama.cpp's
tests/test-chat.cpp (COMMON_CHAT_FORMAT_LLAMA_3_X)."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import partial

from app.chats.reasoning import split_reasoning
from app.tools.formats.base import ToolFormat, all_calls, call_schema, checked_call, json_values, wrapped_grammar
from app.tools.types import ToolCall, ToolUse

TAG = "<|python_tag|>"
PYTHON_CALL = re.compile(r"^([A-Za-z0-9_-]+)\.call\((.*)\)$", re.S)
PYTHON_ARG = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(?:,|$)', re.S)


class Llama3Format(ToolFormat):
    name = "llama3"

    def detects(self, source: str) -> bool:
        return "<|start_header_id|>" in source and '"parameters"' in source

    def parse(self, text: str, use: ToolUse) -> tuple[ToolCall, ...] | None:
        answer = split_reasoning(text).answer.strip()
        answer = answer.removeprefix(TAG).strip()
        python = PYTHON_CALL.match(answer)
        if python:
            return all_calls([checked_call(python.group(1), _python_args(python.group(2)), use)], use)
        values = json_values(answer)
        if not values:
            return None
        return all_calls([_call(v, use) for v in values], use)

    def might_be_call(self, text: str) -> bool:
        start = text.lstrip()
        return not start or start[0] == "{" or TAG.startswith(start[:len(TAG)])

    def grammar(self, use: ToolUse) -> str:
        return wrapped_grammar(replace(use, parallel=False), partial(call_schema, key="parameters"))

    def template_messages(self, messages: list[dict]) -> list[dict]:
        """An assistant turn of several calls as one turn per call: the template takes one."""
        out: list[dict] = []
        for m in super().template_messages(messages):
            calls = m.get("tool_calls") or []
            out += [{**m, "tool_calls": [c]} for c in calls] if len(calls) > 1 else [m]
        return out


def _call(value: object, use: ToolUse) -> ToolCall | None:
    if not isinstance(value, dict):
        return None
    return checked_call(value.get("name"), value.get("parameters", value.get("arguments", {})), use)


def _python_args(text: str) -> dict[str, str] | None:
    args, pos = {}, 0
    for m in PYTHON_ARG.finditer(text):
        if m.start() != pos:
            return None
        args[m.group(1)] = m.group(2).encode().decode("unicode_escape")
        pos = m.end()
    return args if pos == len(text.strip()) or not text.strip() else None
