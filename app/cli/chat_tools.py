"""`chorus chat` with MCP tools (chat_tool_args.py: --mcp, --mcp-config and the rest): the
servers start before the model loads; each reply then runs the tool loop (app/tools/agent.py,
the blocking driver of the one in app/tools/machine.py), printing every call and its result
as it happens, asking "run TOOL(args)? [y]es / [a]lways / [n]o" before each (--yes approves
all; a turn's calls approved run at once, the next asked meanwhile, their results printed
in the calls' order), and storing each turn and each result through the chat's
ConversationSession (the rows the window's tool rounds write)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from typing import Any

from app.cli.chat_tool_args import web_settings_of
from app.conversations import ConversationSession
from app.tools import McpManager, ServerConfig, ServerStatus, Toolbox, ToolLoop
from app.tools.agent import (
    Approval,
    CallFinished,
    CallStarted,
    Notice,
    TextDelta,
    TurnDone,
    always_allow,
    result_content,
)
from app.tools.formats import format_of_engine
from app.tools.mcp_results import McpTool
from app.tools.toolbox import tools_named
from app.tools.types import ToolCall
from app.tools.web import WebTools
from inference import Delta, EngineClient, FinishReason, SamplingParams

SHOWN_RESULT = 400  # characters of a result printed (the model gets it whole, up to the cap)
# chat.py's _until_saved: the write, again on a full disk while the user asks; None if they give up.
Saver = Callable[[Callable[[], Any], str], Any]


def web_tools_of(args: argparse.Namespace) -> WebTools | None:
    settings = web_settings_of(args)
    return WebTools(settings) if settings is not None else None


class TerminalTools:
    """The chat's MCP servers and the loop's settings, for the length of the chat."""

    def __init__(self, manager: McpManager, args: argparse.Namespace) -> None:
        self.manager = manager
        self.toolbox = Toolbox(manager, tools_named(manager, args.enabled_tools), timeout_s=args.tool_timeout,
                               web=web_tools_of(args))
        self.choice, self.max_rounds = args.tool_choice, args.max_tool_rounds
        self.approve = always_allow if args.yes else ask_on_terminal

    @classmethod
    def start(cls, servers: list[ServerConfig], args: argparse.Namespace) -> TerminalTools:
        """Starts them all, each one's state on stderr; a failed one leaves the others on."""
        manager = McpManager()
        for state in manager.start_all(servers):
            print(f"mcp: {state.name} ({state.config.describe()}): {state.summary()}", file=sys.stderr)
            if state.status is ServerStatus.FAILED and state.stderr_tail:
                print("  " + state.stderr_tail.replace("\n", "\n  "), file=sys.stderr)
        return cls(manager, args)

    def shutdown(self) -> None:
        self.manager.shutdown()

    def reply(self, engine: EngineClient, session: ConversationSession, messages: list[dict],
              sampling: SamplingParams, save: Saver, report: Callable[[Delta], None]) -> list[dict] | None:
        """The reply to the last message, tools and all, shown and stored by the chat's
        session (each turn and each result at the end of its branch): the messages it added
        (OpenAI's shape), or None when one could not be stored and the user gave up."""
        start = len(messages)
        loop = ToolLoop(engine, self.toolbox, messages, sampling, choice=self.choice, approve=self.approve,
                        max_rounds=self.max_rounds, tool_format=format_of_engine(engine))
        shown = ""  # the text of the turn on screen
        last_id: int | None = None  # the last row stored, which a stop's "not run" rows follow
        try:
            for event in loop.run():
                if isinstance(event, TextDelta):
                    sys.stdout.write(event.text if shown else "bot> " + event.text)
                    sys.stdout.flush()
                    shown += event.text
                elif isinstance(event, Notice):
                    print(f"[{event.text}]", file=sys.stderr)
                elif isinstance(event, CallStarted):
                    print(f"[tool] {_call_shown(event.call)}")
                elif isinstance(event, CallFinished):
                    print(_result_shown(event))
                    if (row := save(partial(session.record_result, event), "a tool's result")) is None:
                        return None
                    last_id = row.id
                elif isinstance(event, TurnDone):
                    if event.calls and shown and not shown.endswith("\n"):
                        print()  # the prose before the calls (Hermes), then their lines
                    shown = ""
                    if (row := save(partial(session.record_turn, event), "the reply")) is None:
                        return None
                    last_id = row.id
                    if not event.calls:
                        report(event.last)
        except KeyboardInterrupt:
            left = loop.machine.stop()
            if left.calls and last_id is not None:
                # Calls asked about or running when Ctrl-C came: each gets its "not run" row, as
                # the window's Stop writes them, so no call of the history is left without one.
                save(partial(session.record_unanswered, left, last_id), "the calls left")
            else:
                stopped = Delta("", finish_reason=FinishReason.CANCELLED)
                save(partial(session.record_turn, TurnDone(shown, (), stopped)), "the reply")
                messages.append({"role": "assistant", "content": shown})
            print("\n[stopped]", file=sys.stderr)
        return messages[start:]


def ask_on_terminal(call: ToolCall, tool: McpTool) -> Approval:
    while True:
        try:
            answer = input(f"run {_call_shown(call)}? [y]es / [a]lways / [n]o ").strip().lower()
        except EOFError:
            return Approval.DENY
        if answer in ("y", "yes"):
            return Approval.ONCE
        if answer in ("a", "always"):
            return Approval.ALWAYS
        if answer in ("n", "no"):
            return Approval.DENY


def _call_shown(call: ToolCall) -> str:
    return f"{call.name}({call.arguments})"


def _result_shown(event: CallFinished) -> str:
    result = event.result
    if event.denied:
        return f"[{event.call.name}: denied]"
    text = result_content(result)
    more = f"... ({len(text) - SHOWN_RESULT} more characters)" if len(text) > SHOWN_RESULT else ""
    return f"[{event.call.name}, {result.duration_s:.2f} s] {text[:SHOWN_RESULT]}{more}"
