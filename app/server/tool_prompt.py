"""A chat body's tool history checked (a 400 naming the field) and written as plain turns in
the generic format (app/tools/prompt.py): assistant messages with tool_calls as their calls,
role "tool" results as a user turn naming the call they answer."""

from __future__ import annotations

import json
from typing import Any

from app import tools
from app.server.request_parsing import bad, content_text, shown
from app.tools import ToolUse, add_result, calls_text, result_text


def with_tools_prompt(messages: list, use: ToolUse) -> list:
    """The tools' description after the system prompt (checked here), or as one."""
    first = messages[0] if messages else None
    text = None
    if isinstance(first, dict) and first.get("role") in ("system", "developer"):
        text = content_text(first.get("content"), "system", "messages[0].content")
    return tools.with_tools_prompt(messages, use, text)


def plain_messages(messages: Any) -> Any:
    """messages with tool calls and tool results written as text; anything else is left for
    request_parsing to check (and refuse)."""
    if not isinstance(messages, list):
        return messages
    calls: dict[str, str] = {}  # call id -> function name, from the assistant turns so far
    out: list = []
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            out.append(message)
        elif message.get("role") == "tool":
            add_result(out, _result_text(message, where, calls))
        elif message.get("role") == "assistant" and message.get("tool_calls"):  # [] : no calls
            out.append({"role": "assistant", "content": _calls_text(message, where, calls)})
        else:
            out.append(message)
    return out


def _calls_text(message: dict, where: str, calls: dict[str, str]) -> str:
    items = message["tool_calls"]
    if not isinstance(items, list):
        raise bad(f"{where}.tool_calls", f"must be a list, got {shown(items)}")
    written = [_call(item, f"{where}.tool_calls[{j}]", calls) for j, item in enumerate(items)]
    text = content_text(message.get("content"), "assistant", f"{where}.content")
    return calls_text(text, written)


def _call(item: Any, where: str, calls: dict[str, str]) -> dict:
    function = item.get("function") if isinstance(item, dict) else None
    if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not isinstance(function, dict):
        raise bad(where, "must be an object {id, type: \"function\", function: {name, arguments}}")
    name, arguments = function.get("name"), function.get("arguments")
    if not isinstance(name, str) or not name:
        raise bad(f"{where}.function.name", f"must be a non-empty string, got {shown(name)}")
    try:
        parsed = json.loads(arguments) if isinstance(arguments, str) else None
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise bad(f"{where}.function.arguments", "must be a JSON object's text")
    calls[item["id"]] = name
    return {"name": name, "arguments": parsed}


def _result_text(message: dict, where: str, calls: dict[str, str]) -> str:
    call_id = message.get("tool_call_id")
    if not isinstance(call_id, str) or call_id not in calls:
        raise bad(f"{where}.tool_call_id", f"must name a call of an earlier assistant message, got {shown(call_id)}")
    content = content_text(message.get("content"), "tool", f"{where}.content")
    return result_text(calls[call_id], call_id, content)

