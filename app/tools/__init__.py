"""Tool calling, shared by the HTTP server, the terminal chat and the desktop app: the tool
and call types, the generic tool format in the prompt, reading a reply back as calls, the
grammar of a forced call (all model-independent and cheap to import), and MCP servers with
the tool loop that runs their tools between a model's turns (imported on first use: they
bring the MCP SDK)."""

from __future__ import annotations

from importlib import import_module
from typing import Any

from app.tools.grammar import MAX_PARALLEL, ToolSchemaError, call_grammar
from app.tools.parsing import might_be_call, parse_calls
from app.tools.prompt import add_result, calls_text, result_text, tools_prompt, with_tools_prompt
from app.tools.types import Tool, ToolCall, ToolUse, new_call_id

# name -> the module that defines it, imported when the name is first used.
_LAZY: dict[str, str] = {}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'app.tools' has no attribute {name!r}")
    return getattr(import_module(module), name)


__all__ = [
    "MAX_PARALLEL",
    "Tool",
    "ToolCall",
    "ToolSchemaError",
    "ToolUse",
    "add_result",
    "call_grammar",
    "calls_text",
    "might_be_call",
    "new_call_id",
    "parse_calls",
    "result_text",
    "tools_prompt",
    "with_tools_prompt",
]
