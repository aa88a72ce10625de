"""The tool loop as a state machine, Qt-free and never blocking: a model's turn, the calls in
it approved and run, their results given back, the model again, until it answers in text or
the rounds run out. It does no I/O of its own: its driver feeds it what happened (the turn's
deltas, the user's answer, a call's result) and does what `step` says next (start the next
turn's request, ask the user, run a call). The window drives it from the engine's stream and
the approval bar, on the GUI thread (ui/controllers/tool_rounds.py); the terminal drives it
blocking (agent.ToolLoop).

    TURN_DUE --begin_turn--> WRITING --feed(finished)--> ASKING --answer--> RUNNING --ran--> ...
                                  \\-> DONE (text, error,        \\-deny-> (next call)      |
                                       or the last round)                                 v
    (all calls answered) TURN_DUE of round + 1              ASKING / RUNNING of the next call

Each input returns the events it made, for the driver to show and store: TextDelta (text
to show; a reply that may still be a call is held back), TurnDone, CallStarted,
CallFinished, Notice. stop() and close() end it and say which calls were left without a
result."""

from __future__ import annotations

import enum
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from app.tools.mcp_results import McpTool, ToolResult, error_result
from app.tools.rounds import ToolRound
from app.tools.types import ToolCall
from inference import Delta, FinishReason

DENIED = "denied by the user"


class Approval(enum.Enum):
    ONCE = "once"
    ALWAYS = "always"  # this tool, as long as the approval memory keeps it
    DENY = "deny"


class ApprovalMemory(Protocol):
    """Which tools run without asking ("Always for this tool")."""

    def always_allowed(self, tool: McpTool) -> bool: ...

    def allow_always(self, tool: McpTool) -> None: ...


class ApprovedTools:
    """An approval memory for the length of one loop (the terminal's reply); the window's
    (ui/services/mcp_tools.AppTools) keeps it across chats and restarts."""

    def __init__(self) -> None:
        self.keys: set[str] = set()

    def always_allowed(self, tool: McpTool) -> bool:
        return tool_key(tool) in self.keys

    def allow_always(self, tool: McpTool) -> None:
        self.keys.add(tool_key(tool))


def tool_key(tool: McpTool) -> str:
    return f"{tool.server}/{tool.name}"


# ----- what happened (events) ----------------------------------------------------------------


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class TurnDone:
    """A model turn ended: text is what it wrote (when it called tools, the prose before its
    calls, empty when it only called), calls what it called; last is its final delta (stats,
    finish reason, error)."""

    text: str
    calls: tuple[ToolCall, ...]
    last: Delta
    written: str = ""  # its whole text (prose and calls) as the model wrote it, when it called


@dataclass(frozen=True)
class Notice:
    """Something the user should know that is no error: a required call that cannot be forced."""

    text: str


@dataclass(frozen=True)
class CallStarted:
    """Before the approval is asked. tool: None for a call asked again after a restart whose
    tool the chat no longer has."""

    call: ToolCall
    tool: McpTool | None


@dataclass(frozen=True)
class CallFinished:
    call: ToolCall
    tool: McpTool | None
    result: ToolResult
    denied: bool = False


AgentEvent = TextDelta | TurnDone | CallStarted | CallFinished | Notice


# ----- what the driver does next (steps) -----------------------------------------------------


@dataclass(frozen=True)
class StartTurn:
    """Send the next turn's request (round: what it is offered; None: no tools), then
    begin_turn() and feed its deltas."""

    round: ToolRound | None


@dataclass(frozen=True)
class AskApproval:
    call: ToolCall
    tool: McpTool | None


@dataclass(frozen=True)
class RunCall:
    """Run the call (off the caller's thread, or blocking in the terminal), then ran()."""

    call: ToolCall
    tool: McpTool
    arguments: dict


@dataclass(frozen=True)
class Finished:
    """Nothing more to do: an answer came, an error, or the loop was stopped."""


Step = StartTurn | AskApproval | RunCall | Finished | None  # None: a turn is being written


@dataclass(frozen=True)
class Stopped:
    """What stop() or close() left: calls without a result, the first one stopped while it
    ran for ran_s (None: it never started); writing: a turn was being written (its driver
    cancels the request)."""

    calls: tuple[ToolCall, ...] = ()
    ran_s: float | None = None
    writing: bool = False


class Phase(enum.Enum):
    TURN_DUE = "turn due"  # the next turn's request is to be sent
    WRITING = "writing"  # the model writes: feed() its deltas
    ASKING = "asking"  # a call waits for the user: answer()
    RUNNING = "running"  # a call runs: ran() or failed()
    DONE = "done"


def always_allow(call: ToolCall, tool: McpTool) -> Approval:
    return Approval.ONCE


def result_content(result: ToolResult) -> str:
    """A result as the model reads it."""
    return f"Error: {result.text}" if result.is_error and result.text != DENIED else result.text


def unavailable(call: ToolCall) -> ToolResult:
    return ToolResult(f"{call.name} is not available: its MCP server is not running, or the chat turned it off",
                      is_error=True)


class ToolLoopMachine:
    """round: what the first turn is offered (None: no tools, the turn is plain text);
    approvals: which tools run without asking; messages: the chat so far in OpenAI's shape,
    to which each turn and result is appended (the terminal builds its next request from
    it; the window from storage)."""

    def __init__(self, round: ToolRound | None, approvals: ApprovalMemory | None = None,
                 messages: list[dict] | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.round = round
        self.approvals: ApprovalMemory = approvals if approvals is not None else ApprovedTools()
        self.messages = messages if messages is not None else []
        self.clock = clock
        self.phase = Phase.TURN_DUE
        self.text = ""  # the turn's text so far
        self._shown = 0  # how much of it went out as TextDelta
        self.turn: TurnDone | None = None  # the last turn's end
        self.calls: tuple[ToolCall, ...] = ()  # the last turn's calls
        self.answered = 0  # how many of them have a result
        self.started_s = 0.0  # when the running call began
        self._noticed = False

    @classmethod
    def resume(cls, calls: tuple[ToolCall, ...], round: ToolRound | None,
               approvals: ApprovalMemory | None = None) -> ToolLoopMachine:
        """A loop found waiting on calls without a result (the window's tab closed, or the
        app quit, while they waited): round is the one that made them."""
        machine = cls(round, approvals)
        machine._take_calls(calls)
        return machine

    def reoffer(self, round: ToolRound | None) -> None:
        """The tools offered from now on: a resumed loop offers what its chat has on now (its
        servers may have started since it was found waiting)."""
        self.round = round

    # ----- the state ------------------------------------------------------------------------

    @property
    def calling(self) -> bool:
        """Whether this turn may call (tools offered, and not the last round)."""
        return self.round is not None and self.round.calling

    @property
    def holding(self) -> bool:
        """Whether the turn's text so far may still end in a call: from where it may begin
        (all of it, for a format whose calls come first), shown as nothing yet."""
        return self._call_start() is not None

    @property
    def shown(self) -> int:
        """How much of the turn's text went out as TextDelta (what a view may draw of it)."""
        return self._shown

    def _call_start(self) -> int | None:
        return self.round.format.call_start(self.text) if self.round is not None and self.calling else None

    def current(self) -> ToolCall | None:
        return self.calls[self.answered] if self.answered < len(self.calls) else None

    def tool_of(self, call: ToolCall) -> McpTool | None:
        """The tool a call runs: among those offered (a format's parse keeps only those)."""
        return self.round.tools.get(call.name) if self.round is not None else None

    @property
    def step(self) -> Step:
        call = self.current()
        if self.phase is Phase.TURN_DUE:
            return StartTurn(self.round)
        if self.phase is Phase.ASKING and call is not None:
            return AskApproval(call, self.tool_of(call))
        if self.phase is Phase.RUNNING and call is not None:
            tool = self.tool_of(call)
            assert tool is not None  # RUNNING is entered with a tool only
            return RunCall(call, tool, json.loads(call.arguments))
        return None if self.phase is Phase.WRITING else Finished()

    # ----- the turn -------------------------------------------------------------------------

    def begin_turn(self) -> list[AgentEvent]:
        """The turn's request went to the engine: its deltas follow."""
        if self.phase is not Phase.TURN_DUE:
            return []
        self.phase, self.text, self._shown = Phase.WRITING, "", 0
        if self.round is not None and self.round.unforced and not self._noticed:
            self._noticed = True
            return [Notice(self.round.unforced)]
        return []

    def feed(self, delta: Delta) -> list[AgentEvent]:
        """One delta of the turn (or several merged: its text is what is new)."""
        if self.phase is not Phase.WRITING:
            return []  # stopped meanwhile: a late delta
        self.text += delta.text
        out: list[AgentEvent] = []
        start = self._call_start()  # the text before it is prose, shown as it comes
        end = len(self.text) if start is None else start
        if end > self._shown:
            out.append(TextDelta(self.text[self._shown:end]))
            self._shown = end
        if delta.finished:
            out += self._turn_ended(delta)
        return out

    def _turn_ended(self, last: Delta) -> list[AgentEvent]:
        parse = self.calling and self.round is not None and last.finish_reason is FinishReason.STOP
        found = self.round.format.split(self.text, self.round.use) if parse and self.round is not None else None
        prose, calls = found if found is not None else ("", ())
        out: list[AgentEvent] = []
        if not calls and len(self.text) > self._shown:  # what was held is text after all
            out.append(TextDelta(self.text[self._shown:]))
            self._shown = len(self.text)
        self.turn = TurnDone(prose if calls else self.text, calls, last, self.text if calls else "")
        out.append(self.turn)
        if not calls:
            self.messages.append({"role": "assistant", "content": self.text})
            self.phase = Phase.DONE
            return out
        # "written": the next prompt shows the calls as the model wrote them, so the tokens it
        # generated are found in its KV (written again by json.dumps, the spacing differs and
        # some 20 tokens a call were computed again)
        self.messages.append({"role": "assistant", "content": prose, "written": self.text,
                              "tool_calls": [c.openai() for c in calls]})
        return out + self._take_calls(calls)

    # ----- the calls ------------------------------------------------------------------------

    def _take_calls(self, calls: tuple[ToolCall, ...]) -> list[AgentEvent]:
        self.calls, self.answered = calls, 0
        return self._enter_call()

    def _enter_call(self) -> list[AgentEvent]:
        """The next call is asked about (or run, when its tool is always allowed); after the
        last one, the next round's turn is due."""
        call = self.current()
        if call is None:
            self.round = self.round.next() if self.round is not None else None
            self.phase = Phase.TURN_DUE
            return []
        tool = self.tool_of(call)
        if tool is not None and self.approvals.always_allowed(tool):
            self._run()
        else:
            self.phase = Phase.ASKING
        return [CallStarted(call, tool)]

    def _run(self) -> None:
        self.phase, self.started_s = Phase.RUNNING, self.clock()

    def answer(self, approval: Approval) -> list[AgentEvent]:
        """The user's answer to the call asked about: run it (once, or always for its tool)
        or tell the model it was denied. A tool gone meanwhile is an error result."""
        call = self.current()
        if self.phase is not Phase.ASKING or call is None:
            return []
        tool = self.tool_of(call)
        if approval is Approval.DENY:
            return self._finish_call(ToolResult(DENIED, is_error=True), denied=True)
        if tool is None:
            return self._finish_call(unavailable(call))
        if approval is Approval.ALWAYS:
            self.approvals.allow_always(tool)
        self._run()
        return []

    def ran(self, result: ToolResult) -> list[AgentEvent]:
        """The running call's result (an error result is given to the model as such)."""
        if self.phase is not Phase.RUNNING:
            return []  # stopped meanwhile: the result is not wanted
        return self._finish_call(result)

    def failed(self, exc: BaseException) -> list[AgentEvent]:
        """The running call raised: the model reads why, as the call's error result."""
        return self.ran(error_result(f"the call failed: {exc}", self.clock() - self.started_s))

    def _finish_call(self, result: ToolResult, denied: bool = False) -> list[AgentEvent]:
        call = self.current()
        assert call is not None
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": result_content(result)})
        self.answered += 1
        return [CallFinished(call, self.tool_of(call), result, denied), *self._enter_call()]

    # ----- the end --------------------------------------------------------------------------

    def stop(self) -> Stopped:
        """The user stopped the loop: a turn being written is to be cancelled, the calls
        without a result are left as not run (the one running, as stopped)."""
        return self._end(self.calls[self.answered:])

    def close(self) -> Stopped:
        """Its chat closed: a running call is given up as stop() does; the calls still to be
        asked about stay without a result, to be asked again (resume) when it opens."""
        return self._end(self.calls[self.answered:self.answered + 1] if self.phase is Phase.RUNNING else ())

    def _end(self, left: tuple[ToolCall, ...]) -> Stopped:
        phase, self.phase = self.phase, Phase.DONE
        if phase not in (Phase.ASKING, Phase.RUNNING):
            return Stopped(writing=phase is Phase.WRITING)
        ran_s = self.clock() - self.started_s if phase is Phase.RUNNING else None
        return Stopped(left, ran_s)
