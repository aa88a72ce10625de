"""What an MCP server offers and answers, as plain data for the tool loop and the UI: its
tools (name, description, input schema) and a call's result as text (text parts joined,
images, audio and resources noted by what they are), capped in size with the cut said."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mcp_types

DEFAULT_OUTPUT_CAP = 20_000  # characters of a tool's output that go back to the model


@dataclass(frozen=True)
class McpTool:
    server: str
    name: str
    description: str
    input_schema: dict


@dataclass(frozen=True)
class ToolResult:
    """text: what goes back to the model (an error's reason when is_error); cut_chars: how
    many characters of the output were left out (0: none)."""

    text: str
    is_error: bool = False
    duration_s: float = 0.0
    cut_chars: int = 0


def tool_of(server: str, tool: mcp_types.Tool) -> McpTool:
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    return McpTool(server, tool.name, tool.description or "", {"type": "object", **schema})


def result_of(result: mcp_types.CallToolResult, duration_s: float, cap: int) -> ToolResult:
    text = "\n".join(_part(p) for p in result.content)
    if not result.content and result.structured_content is not None:
        text = str(result.structured_content)
    return capped(text, bool(result.is_error), duration_s, cap)


def error_result(reason: str, duration_s: float = 0.0) -> ToolResult:
    return ToolResult(reason, is_error=True, duration_s=duration_s)


def capped(text: str, is_error: bool, duration_s: float, cap: int) -> ToolResult:
    if len(text) <= cap:
        return ToolResult(text, is_error, duration_s)
    cut = len(text) - cap
    return ToolResult(f"{text[:cap]}\n[output cut: {cut} of {len(text)} characters left out]", is_error,
                      duration_s, cut)


def _part(part: Any) -> str:
    kind = getattr(part, "type", None)
    if kind == "text":
        return str(part.text)
    if kind in ("image", "audio"):
        return f"[{kind}]"  # the model reads text only
    if kind == "resource_link":
        return f"[resource {part.uri}]"
    if kind == "resource":
        inner = part.resource
        text = getattr(inner, "text", None)
        return f"[resource {inner.uri}]" + (f"\n{text}" if isinstance(text, str) else "")
    return f"[{kind or 'unknown'} content]"

