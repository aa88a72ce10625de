"""The one interface every tool format plays: how a model family writes its calls.

A native format (hermes, llama3, mistral) is the one the model's chat template has: the
tools go to the template's `tools` variable, the history's calls and results stay in
OpenAI's shape (arguments as dicts, as HF transformers gives them) and the template writes
them; the reply is read back in that family's markup. The generic format (generic.py) is
for templates without one: tools described in the system prompt, calls as plain JSON."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any

from app.tools.grammar import MAX_PARALLEL, call_grammar
from app.tools.types import Tool, ToolCall, ToolUse, new_call_id
from inference import lark_grammar, lark_json, lark_literal

JSON = json.JSONDecoder()


class ToolFormat(ABC):
    name: str
    native = True  # the template writes tools and calls (ChatRequest.tools)

    @abstractmethod
    def detects(self, source: str) -> bool:
        """Whether a chat template (one that reads `tools`) writes calls this way."""

    @abstractmethod
    def parse(self, text: str, use: ToolUse) -> tuple[ToolCall, ...] | None:
        """The calls a whole reply makes, or None when it is text (malformed calls too)."""

    @abstractmethod
    def might_be_call(self, text: str) -> bool:
        """Whether a reply's beginning could still turn out to be a call (a stream holds it)."""

    @abstractmethod
    def grammar(self, use: ToolUse) -> str:
        """GBNF that forces a call of use.callable (tool_choice "required" or named)."""

    def call_start(self, text: str) -> int | None:
        """Where a call may begin in a reply so far: a stream shows the text before it and
        holds back the rest; None: nowhere (all of it is text). Most families call only at
        the start of a reply (as llama.cpp's parsers read them): 0 while the whole of it may
        still be a call."""
        return 0 if self.might_be_call(text) else None

    def split(self, text: str, use: ToolUse) -> tuple[str, tuple[ToolCall, ...]] | None:
        """A whole reply as (prose, calls): the text it wrote before its calls (its trailing
        white space left out; empty when it only called) and the calls; None when it is text.
        prose is the reply's own text, reasoning and all, as a reply in text is kept."""
        calls = self.parse(text, use)
        return ("", calls) if calls else None

    def template_tools(self, use: ToolUse) -> tuple[dict, ...]:
        return tuple({"type": "function", "function": {"name": t.name, "description": t.description,
                                                       "parameters": t.parameters}} for t in use.tools)

    def template_messages(self, messages: list[dict]) -> list[dict]:
        """OpenAI-shaped history as the template reads it: arguments as dicts."""
        return [_with_dict_arguments(m) for m in messages]


def _with_dict_arguments(message: dict) -> dict:
    if not message.get("tool_calls"):
        return {k: v for k, v in message.items() if k not in ("tool_calls", "written")}  # Llama tests 'in'
    calls = [{**c, "function": {**c["function"], "arguments": as_dict(c["function"]["arguments"])}}
             for c in message["tool_calls"]]
    return {**{k: v for k, v in message.items() if k != "written"}, "tool_calls": calls}


def as_dict(arguments: Any) -> Any:
    return json.loads(arguments) if isinstance(arguments, str) else arguments


def checked_call(name: Any, arguments: Any, use: ToolUse) -> ToolCall | None:
    """A call of a tool the reply may call, its arguments an object (or its JSON text)."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if name not in {t.name for t in use.callable} or not isinstance(arguments, dict):
        return None
    return ToolCall(new_call_id(), name, json.dumps(arguments, ensure_ascii=False))


def all_calls(calls: list[ToolCall | None], use: ToolUse) -> tuple[ToolCall, ...] | None:
    """The calls when every one is valid and their number is allowed."""
    if not calls or any(c is None for c in calls) or (len(calls) > 1 and not use.parallel):
        return None
    return tuple(c for c in calls if c is not None)


def json_values(text: str) -> list[Any] | None:
    """Consecutive JSON values separated by whitespace (or commas), or None."""
    values: list[Any] = []
    pos = 0
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,;":
            pos += 1
        if pos == len(text):
            return values
        try:
            value, pos = JSON.raw_decode(text, pos)
        except ValueError:
            return None
        values.append(value)


def wrapped_grammar(use: ToolUse, call_schema: Any, before: str = "", after: str = "", joiner: str = "",
                    opening: str = "", closing: str = "") -> str:
    """The grammar (Lark, llguidance's) of one call (up to MAX_PARALLEL, joined by joiner, when
    parallel and required) as call_schema(tool) JSON, each between before and after, all
    between opening and closing. Checked by call_grammar first, so that an unenforceable
    keyword names its tool."""
    call_grammar(use)
    one = [call_schema(t) for t in use.callable]
    schema = one[0] if len(one) == 1 else {"anyOf": one}
    many = use.parallel and use.choice == "required"
    more = f" ({_literal(joiner)} call_item)?" * (MAX_PARALLEL - 1) if many else ""
    lark = (f"start: {_literal(opening)} call_item{more} {_literal(closing)}\n"
            f"call_item: {_literal(before)} call_json {_literal(after)}\n"
            f"call_json: {lark_json(schema)}\n")
    return lark_grammar(lark, (schema,))


def _literal(text: str) -> str:
    return lark_literal(text) if text else ""


def call_schema(tool: Tool, key: str = "arguments") -> dict:
    """The JSON of one call: {"name": the tool's, key: its parameters}."""
    return {"type": "object", "properties": {"name": {"const": tool.name}, key: tool.parameters},
            "required": ["name", key]}
