"""What one turn of a tool loop is offered, and the request it makes: the tools (by the name
the model sees), the round it is of the reply's loop, the forced grammar of a required call
and the model's tool format. The terminal's loop and the window's build their engine
requests from it, so both send the same prompt for the same history.

The prompt stays the same across rounds (the tools in the system prompt, worded as for
"auto", or in the template's `tools`), so each follow-up turn reuses the KV of the one
before and computes only the new tokens. tool_choice "required" forces the first turn's call
with the tools' grammar; later turns may answer in text; the last round offers no call at
all, so an answer comes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from app.tools.formats import GENERIC, ToolFormat
from app.tools.grammar import ToolSchemaError
from app.tools.prompt import plain_turns, with_tools_prompt
from app.tools.types import TOOL_CHOICES, ToolUse
from inference import ChatRequest, SamplingParams

if TYPE_CHECKING:  # the MCP SDK's types are imported only where a call runs
    from app.tools.mcp_results import McpTool

DEFAULT_MAX_ROUNDS = 5


@dataclass(frozen=True)
class ToolRound:
    """tools: what the model may call, by the name it sees; round: which turn of the reply's
    loop this is (0 the first); the last one (max_rounds - 1) may not call."""

    tools: Mapping[str, McpTool]
    use: ToolUse
    round: int = 0
    max_rounds: int = DEFAULT_MAX_ROUNDS
    # tool_choice "required": the first turn's grammar, which forces a call that validates
    # against the tools' schemas (later turns may answer in text).
    grammar: str | None = None
    # How the chat's model writes calls (its template's own format, or the generic one).
    format: ToolFormat = GENERIC
    required: bool = False  # tool_choice "required": the grammar follows the format
    unforced: str | None = None  # why a required call is asked for but not (wholly) forced

    @classmethod
    def offer(cls, tools: Mapping[str, McpTool], specs: Sequence, *, choice: str = "auto",
              max_rounds: int = DEFAULT_MAX_ROUNDS, parallel: bool = True,
              tool_format: ToolFormat = GENERIC) -> ToolRound | None:
        """The first round of a reply offered tools (specs: their Tool descriptions, in
        tools' order); None when none is offered (tool_choice "none", or no tool)."""
        if choice not in TOOL_CHOICES:
            raise ValueError(f"tool_choice must be one of {', '.join(TOOL_CHOICES)}, got {choice!r}")
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        if choice == "none" or not tools:
            return None
        use = ToolUse(tuple(specs), "auto", None, parallel)
        required = choice == "required"
        grammar, unforced = forced_grammar(use, tool_format) if required else (None, None)
        return cls(dict(tools), use, 0, max_rounds, grammar, tool_format, required, unforced)

    @property
    def forced_grammar(self) -> str | None:
        return self.grammar if self.round == 0 else None

    @property
    def calling(self) -> bool:
        return self.round < self.max_rounds - 1

    def next(self) -> ToolRound:
        return replace(self, round=self.round + 1)

    def at(self, calls_before: int) -> ToolRound:
        """The round of a reply that follows calls_before turns of calls since the user's
        message (a regenerated answer after a tool's result goes on from the calls already
        made, not forced to call again as a reply's first turn is)."""
        return replace(self, round=min(calls_before, self.max_rounds - 1)) if calls_before else self

    def with_format(self, fmt: ToolFormat) -> ToolRound:
        """This round in the model's own format, its forced grammar (if any) in that format."""
        if fmt is self.format:
            return self
        grammar, unforced = self.grammar, self.unforced
        if self.required:
            grammar, unforced = forced_grammar(self.use, fmt)
        return replace(self, format=fmt, grammar=grammar, unforced=unforced)

    # ----- the request ------------------------------------------------------------------------

    def turns(self, messages: list[dict]) -> list[dict]:
        """The loop's history (OpenAI's shape) as the template reads it: a native format's
        calls and results for its template, the generic one's as plain turns."""
        return self.format.template_messages(messages) if self.format.native else plain_turns(messages)

    def with_tools(self, messages: list[dict]) -> list[dict]:
        """turns() (documents added, if any) with the tools described after them, in the
        generic format; a native format's template writes them (template_tools)."""
        return messages if self.format.native else with_tools_prompt(messages, self.use)

    def prompt(self, messages: list[dict]) -> list[dict]:
        return self.with_tools(self.turns(messages))

    def template_tools(self) -> tuple[dict, ...] | None:
        """ChatRequest.tools: the tools for a native format's template."""
        return self.format.template_tools(self.use) if self.format.native else None

    def sampling(self, sampling: SamplingParams) -> SamplingParams:
        """A required call's first turn: the grammar makes it validate, and the call ends it."""
        grammar = self.forced_grammar
        return replace(sampling, grammar=grammar, ignore_eos=False) if grammar is not None else sampling

    def request(self, messages: list[dict], sampling: SamplingParams, priority: int) -> ChatRequest:
        return ChatRequest(messages=tuple(self.prompt(messages)), sampling=self.sampling(sampling),
                           priority=priority, tools=self.template_tools())


def plain_request(messages: list[dict], sampling: SamplingParams, priority: int) -> ChatRequest:
    """A turn offered no tools: the history's calls and results (if any) as plain turns."""
    return ChatRequest(messages=tuple(plain_turns(messages)), sampling=sampling, priority=priority)


def forced_grammar(use: ToolUse, fmt: ToolFormat = GENERIC) -> tuple[str | None, str | None]:
    """The grammar that forces a call, and what could not be forced. A tool whose schema holds a
    keyword the grammar cannot enforce is left out of the forcing (the others are still forced:
    one server's odd schema must not unforce every tool); with none left the call is asked
    for, not forced."""
    try:
        return fmt.grammar(replace(use, choice="required")), None
    except ToolSchemaError as whole:
        held, reasons = [], []
        for tool in use.tools:
            try:
                fmt.grammar(replace(use, tools=(tool,), choice="required"))
                held.append(tool)
            except ToolSchemaError as exc:
                reasons.append(str(exc))
        if not held:
            return None, f"the call is not forced: {whole}"
        note = f"the call is forced among {len(held)} of {len(use.tools)} tools; not forcible: {'; '.join(reasons)}"
        return fmt.grammar(replace(use, tools=tuple(held), choice="required")), note
