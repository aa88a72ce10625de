"""A reply read back as tool calls: the whole reply (its reasoning left out) is one call
{"name", "arguments"} or a list of them, of tools the reply may call, in the generic format
(prompt.py); the <tool_call> tags of Hermes-style models and a Markdown code fence
around it are allowed, since small models write them unasked. Anything else is text: a
malformed call in "auto" mode is returned as the model wrote it, never an error."""

from __future__ import annotations

import json
import re
from typing import Any

from app.chats.reasoning import split_reasoning
from app.tools.types import ToolCall, ToolUse, new_call_id

FENCE = re.compile(r"^```[A-Za-z]*\s*(.*?)\s*```$", re.S)
TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
OPENERS = "{[<`"  # how a call may begin (a stream holds such a reply back until it ends)


def might_be_call(text: str) -> bool:
    """Whether text so far (a reply's beginning) could still turn out to be a call."""
    start = text.lstrip()
    return not start or start[0] in OPENERS


def parse_calls(text: str, use: ToolUse) -> tuple[ToolCall, ...] | None:
    value = _json(_unwrapped(split_reasoning(text).answer))
    items = value if isinstance(value, list) else [value]
    if not items or (len(items) > 1 and not use.parallel):
        return None
    names = {t.name for t in use.callable}
    calls = [_call(item, names) for item in items]
    if any(c is None for c in calls):
        return None
    return tuple(c for c in calls if c is not None)


def _unwrapped(text: str) -> str:
    text = text.strip()
    fenced = FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    tagged = TAGGED.findall(text)
    if tagged and TAGGED.sub("", text).strip() == "":
        return tagged[0] if len(tagged) == 1 else "[" + ",".join(tagged) + "]"
    return text


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _call(item: Any, names: set[str]) -> ToolCall | None:
    if not isinstance(item, dict) or item.get("name") not in names:
        return None
    arguments = item.get("arguments", item.get("parameters", {}))  # some models say parameters
    if isinstance(arguments, str):  # arguments as a JSON string, OpenAI's own wire shape
        arguments = _json(arguments)
    if not isinstance(arguments, dict):
        return None
    return ToolCall(new_call_id(), item["name"], json.dumps(arguments, ensure_ascii=False))
