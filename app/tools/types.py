"""Tools a reply may call and the calls it made: plain data shared by the HTTP server
(app/server/openai/tool_*.py), the tool loop (agent.py) and the terminal chat."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

TOOL_CHOICES = ("auto", "required", "none")  # what a chat (not the HTTP API) chooses among


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict  # a JSON Schema of an object


@dataclass(frozen=True)
class ToolUse:
    """choice: "auto" (the model may call), "required" (it must call one of tools) or
    "named" (it must call `name`). tool_choice "none" is no ToolUse at all."""

    tools: tuple[Tool, ...]
    choice: str = "auto"
    name: str | None = None
    parallel: bool = True

    @property
    def forced(self) -> bool:
        return self.choice != "auto"

    @property
    def callable(self) -> tuple[Tool, ...]:
        """The tools this reply may call."""
        return tuple(t for t in self.tools if self.name is None or t.name == self.name)


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # a JSON object's text, as OpenAI sends it

    def openai(self) -> dict:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


def new_call_id() -> str:
    return "call_" + secrets.token_hex(12)
