"""The tool loop, Qt-free: a model's turn, the calls in it approved and run, their results
given back, the model again, until it answers in text or the rounds run out. It runs on the
caller's thread (a worker's: it blocks on the engine, the approval and the tools) and
yields events for a terminal or a window to show.

The prompt stays the same across rounds (the tools in the system prompt, worded as for
"auto"), so each follow-up turn reuses the KV of the one before and computes only the new
tokens. tool_choice "required" forces the first turn's call with the tools' grammar; later
turns may answer in text; the last round offers no call at all, so an answer comes."""

from __future__ import annotations

import enum
import json
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, replace
from typing import Protocol

from app.tools.formats import GENERIC, ToolFormat
from app.tools.grammar import ToolSchemaError
from app.tools.mcp_results import McpTool, ToolResult
from app.tools.toolbox import Toolbox
from app.tools.types import TOOL_CHOICES, ToolCall, ToolUse
from inference import PRIORITY_VISIBLE_TAB, ChatRequest, Delta, SamplingParams

DEFAULT_MAX_ROUNDS = 5
DENIED = "denied by the user"


class Approval(enum.Enum):
    ONCE = "once"
    ALWAYS = "always"  # this tool, for the rest of the loop (and for whoever keeps the loop)
    DENY = "deny"


class Reply(Protocol):
    def __iter__(self) -> Iterator[Delta]: ...

    def cancel(self) -> None: ...


class Engine(Protocol):
    """A local Engine, an engine host's client or a remote server's replies."""

    def submit(self, chat: ChatRequest) -> Reply: ...


Approver = Callable[[ToolCall, McpTool], Approval]


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class TurnDone:
    """A model turn ended: text is what it wrote (empty when it called tools), calls what it
    called; last is its final delta (stats, finish reason, error)."""

    text: str
    calls: tuple[ToolCall, ...]
    last: Delta
    written: str = ""  # the calls as the model wrote them (its whole text), when it called


@dataclass(frozen=True)
class Notice:
    """Something the user should know that is no error: a required call that cannot be forced."""

    text: str


@dataclass(frozen=True)
class CallStarted:
    """Before the approval is asked."""

    call: ToolCall
    tool: McpTool


@dataclass(frozen=True)
class CallFinished:
    call: ToolCall
    tool: McpTool
    result: ToolResult
    denied: bool = False


AgentEvent = TextDelta | TurnDone | CallStarted | CallFinished | Notice


def always_allow(call: ToolCall, tool: McpTool) -> Approval:
    return Approval.ONCE


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


class ToolLoop:
    """messages: the chat so far in OpenAI's shape (assistant turns may carry tool_calls,
    {"role": "tool", "tool_call_id", "content"} the results); run() appends to it what each
    round adds, so after the loop it holds the whole exchange. tool_format: the model's
    (app/tools/formats.format_for_template of its chat template); a native one has the
    template write the tools, calls and results, the generic one writes them as text."""

    def __init__(self, engine: Engine, toolbox: Toolbox, messages: list[dict], sampling: SamplingParams, *,
                 choice: str = "auto", approve: Approver = always_allow, max_rounds: int = DEFAULT_MAX_ROUNDS,
                 parallel: bool = True, priority: int = PRIORITY_VISIBLE_TAB,
                 tool_format: ToolFormat = GENERIC) -> None:
        if choice not in TOOL_CHOICES:
            raise ValueError(f"tool_choice must be one of {', '.join(TOOL_CHOICES)}, got {choice!r}")
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self.engine, self.toolbox, self.messages, self.sampling = engine, toolbox, messages, sampling
        self.choice, self.approve, self.max_rounds, self.priority = choice, approve, max_rounds, priority
        self.format = tool_format
        self.allowed: set[str] = set()  # tools approved "always"
        on = choice != "none" and bool(toolbox)
        self.use = ToolUse(toolbox.specs(), "auto", None, parallel) if on else None
        self.grammar: str | None = None  # the forced first turn's
        self.unforced: str | None = None  # why a required call is asked for but not forced
        if self.use is not None and choice == "required":
            self.grammar, self.unforced = forced_grammar(self.use, tool_format)

    def run(self) -> Iterator[AgentEvent]:
        if self.unforced:
            yield Notice(self.unforced)
        for round_ in range(self.max_rounds):
            calling = self.use is not None and round_ < self.max_rounds - 1
            forced = calling and self.grammar is not None and round_ == 0
            turn = yield from self._turn(calling, forced)
            if turn.calls:
                # "written": the next prompt shows the calls as the model wrote them, so the
                # tokens it generated are found in its KV (written again by json.dumps, the
                # spacing differs and some 20 tokens a call were computed again)
                self.messages.append({"role": "assistant", "content": "", "written": turn.written,
                                      "tool_calls": [c.openai() for c in turn.calls]})
                for call in turn.calls:
                    yield from self._run_call(call)
            else:
                self.messages.append({"role": "assistant", "content": turn.text})
            if not turn.calls or turn.last.error:
                return

    def _turn(self, calling: bool, forced: bool) -> Generator[AgentEvent, None, TurnDone]:
        sampling = replace(self.sampling, grammar=self.grammar) if forced else self.sampling
        tools = self.format.template_tools(self.use) if self.use is not None and self.format.native else None
        handle = self.engine.submit(ChatRequest(messages=tuple(self.prompt()), sampling=sampling,
                                                priority=self.priority, tools=tools))
        text, sent, last = "", 0, None
        try:
            for delta in handle:
                text += delta.text
                if not (calling and self.format.might_be_call(text)) and len(text) > sent:
                    yield TextDelta(text[sent:])
                    sent = len(text)
                if delta.finished:
                    last = delta
        finally:
            if last is None:
                handle.cancel()  # the loop was closed mid-turn
        assert last is not None
        calls = self.format.parse(text, self.use) if calling and self.use is not None and not last.error else None
        if not calls and len(text) > sent:
            yield TextDelta(text[sent:])
        done = TurnDone("" if calls else text, calls or (), last, text if calls else "")
        yield done
        return done

    def _run_call(self, call: ToolCall) -> Iterator[AgentEvent]:
        tool = self.toolbox.by_name[call.name]  # parse_calls keeps only the tools offered
        yield CallStarted(call, tool)
        approval = Approval.ONCE if call.name in self.allowed else self.approve(call, tool)
        if approval is Approval.ALWAYS:
            self.allowed.add(call.name)
        if approval is Approval.DENY:
            result, denied = ToolResult(DENIED, is_error=True), True
        else:
            result, denied = self.toolbox.call(call.name, json.loads(call.arguments)), False
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": result_content(result)})
        yield CallFinished(call, tool, result, denied)

    def prompt(self) -> list[dict]:
        """The engine's messages: OpenAI-shaped for a native format's template; in the generic
        format, the calls and results as text (and the tools in the system prompt)."""
        if self.use is not None and self.format.native:
            return self.format.template_messages(self.messages)
        plain = GENERIC.template_messages(self.messages)
        return GENERIC.prompt(self.messages, self.use) if self.use is not None else plain


def result_content(result: ToolResult) -> str:
    """A result as the model reads it."""
    return f"Error: {result.text}" if result.is_error and result.text != DENIED else result.text
