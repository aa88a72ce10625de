"""A chat body's tool history checked (a 400 naming the field) and written either as plain
turns in the generic format (app/tools/prompt.py): assistant messages with tool_calls as
their calls, role "tool" results as a user turn naming the call they answer; or, for a
template with its own tool format, kept in OpenAI's shape for the template to write
(native_messages: arguments as dicts)."""

from __future__ import annotations

import json
from typing import Any

from app import tools
from app.server.calls.parsing import bad, content_text, shown
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
    parsing.py to check (and refuse)."""
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
    written = [function for _, function in _checked_calls(message, where, calls)]
    text = content_text(message.get("content"), "assistant", f"{where}.content")
    return calls_text(text, written)


def _checked_calls(message: dict, where: str, calls: dict[str, str]) -> list[tuple[str, dict]]:
    """(id, {"name", "arguments": a dict}) of each call of an assistant turn, checked."""
    items = message["tool_calls"]
    if not isinstance(items, list):
        raise bad(f"{where}.tool_calls", f"must be a list, got {shown(items)}")
    checked = []
    for j, item in enumerate(items):
        function = _call(item, f"{where}.tool_calls[{j}]", calls)  # checks item["id"] too
        checked.append((item["id"], function))
    return checked


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



def native_messages(messages: Any) -> tuple[Any, dict[int, dict]]:
    """messages with each tool turn as a plain one (for parsing.py to check the rest and
    read the contents as text), and by index those tool turns in OpenAI's shape, checked."""
    if not isinstance(messages, list):
        return messages, {}
    calls: dict[str, str] = {}
    plain: list = []
    native: dict[int, dict] = {}
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if isinstance(message, dict) and message.get("role") == "tool":
            _result_text(message, where, calls)  # checks the call it answers
            text = content_text(message.get("content"), "tool", f"{where}.content")
            native[i] = {"role": "tool", "tool_call_id": message["tool_call_id"], "content": text}
            plain.append({"role": "user", "content": text})
        elif isinstance(message, dict) and message.get("role") == "assistant" and message.get("tool_calls"):
            native[i] = _native_calls(message, where, calls)
            plain.append({"role": "assistant", "content": native[i]["content"]})
        else:
            plain.append(message)
    return plain, native


def _native_calls(message: dict, where: str, calls: dict[str, str]) -> dict:
    written = [{"id": call_id, "type": "function", "function": function}
               for call_id, function in _checked_calls(message, where, calls)]
    return {"role": "assistant", "content": content_text(message.get("content"), "assistant", f"{where}.content"),
            "tool_calls": written}
