"""The generic tool format: how tools, the calls a model made and their results are written
into a chat's messages for a model whose chat template has no tool format of its own
(SmolLM2's has none; the engine renders only role and content today).

The tools and the call format go in the system prompt; a call is a JSON object
{"name": ..., "arguments": {...}} (several: a JSON list of them) and nothing else, which is
what tool_output.py reads back and what a forced call's grammar produces. An assistant turn
that called tools shows its calls that way; a tool's result becomes a user turn naming the
call it answers (consecutive results in one turn: some templates refuse two user turns in a
row)."""

from __future__ import annotations

import json
from typing import Any

from app.server.request_parsing import bad, content_text, shown
from app.server.tool_types import ToolUse


def tools_prompt(use: ToolUse) -> str:
    lines = ["You can call these functions (their parameters as JSON Schema):"]
    lines += [json.dumps({"name": t.name, "description": t.description, "parameters": t.parameters},
                         ensure_ascii=False) for t in use.tools]
    rule = ('To call a function, reply with only a JSON object and nothing before or after it: '
            '{"name": "<the function\'s name>", "arguments": {<its arguments>}}.')
    if use.parallel:
        rule += " To call several at once, reply with a JSON list of such objects."
    if use.choice == "named":
        rule += f" Call {use.name} now."
    elif use.choice == "required":
        rule += " Call a function now."
    else:
        rule += " If no function is needed, answer in plain text."
    return "\n".join(lines + [rule])


def with_tools_prompt(messages: list, use: ToolUse) -> list:
    """The tools' description after the system prompt, or as one."""
    prompt = tools_prompt(use)
    first = messages[0] if messages else None
    if isinstance(first, dict) and first.get("role") in ("system", "developer"):
        text = content_text(first.get("content"), "system", "messages[0].content")
        return [{"role": "system", "content": f"{text}\n\n{prompt}"}, *messages[1:]]
    return [{"role": "system", "content": prompt}, *messages]


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
            _add_result(out, _result_text(message, where, calls))
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
    shown_calls = json.dumps(written[0] if len(written) == 1 else written, ensure_ascii=False)
    return f"{text}\n{shown_calls}" if text else shown_calls


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
    return f"The result of {calls[call_id]} (call {call_id}):\n{content}"


def _add_result(out: list, text: str) -> None:
    last = out[-1] if out else None
    if isinstance(last, dict) and last.get("tool_results"):
        last["content"] += "\n\n" + text
    else:
        out.append({"role": "user", "content": text, "tool_results": True})
