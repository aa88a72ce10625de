"""The generic format (app/tools/prompt.py, parsing.py, grammar.py) as a ToolFormat: for a
template without a tool format of its own (SmolLM2's ChatML, Gemma's)."""

from __future__ import annotations

from app.tools.formats.base import ToolFormat
from app.tools.grammar import call_grammar
from app.tools.parsing import might_be_call, parse_calls
from app.tools.prompt import plain_turns, with_tools_prompt
from app.tools.types import ToolCall, ToolUse


class GenericFormat(ToolFormat):
    name = "generic"
    native = False  # the tools are in the system prompt, calls and results plain turns

    def detects(self, source: str) -> bool:
        return True  # the fallback of every template

    def parse(self, text: str, use: ToolUse) -> tuple[ToolCall, ...] | None:
        return parse_calls(text, use)

    def might_be_call(self, text: str) -> bool:
        return might_be_call(text)

    def grammar(self, use: ToolUse) -> str:
        return call_grammar(use)

    def template_tools(self, use: ToolUse) -> tuple[dict, ...]:
        return ()

    def template_messages(self, messages: list[dict]) -> list[dict]:
        return plain_turns(messages)

    def prompt(self, messages: list[dict], use: ToolUse) -> list[dict]:
        """The loop's own history (arguments as JSON text) as the generic prompt."""
        return with_tools_prompt(plain_turns(messages), use)
