"""The tool loop as a state machine, Qt-free and never blocking: a model's turn, the calls in
it approved and run, their results given back, the model again, until it answers in text or
the rounds run out. It does no I/O of its own: its driver feeds it what happened (the turn's
deltas, the user's answer, a call's result) and does what `steps()` say next (start the
next turn's request, ask the user, run calls). The window drives it from the engine's stream
and the approval bar, on the GUI thread (ui/controllers/tool_rounds.py); the terminal drives it
blocking (agent.ToolLoop).

    TURN_DUE --begin_turn--> WRITING --feed(finished)--> ASKING --answer--> ASKING of the next call,
                                  \\-> DONE (text, error,                  or RUNNING (none left to ask)
                                       or the last round)
    (every call's result in: ran, failed or denied) TURN_DUE of round + 1

The calls of one turn run at once, at most MAX_PARALLEL_CALLS of them: they are asked about
one at a time, in order, and a call approved starts while the next is asked (steps() hands
out each RunCall once; ran(result, call_id) gives its result back, in any order). Their
results go to the model in the calls' order: one that comes before an earlier call's is
held until that one's is in.

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
from itertools import zip_longest
from typing import Protocol

from app.tools.mcp_results import McpTool, ToolResult, error_result
from app.tools.rounds import ToolRound
from app.tools.types import ToolCall
from inference import Delta, FinishReason

DENIED = "denied by the user"
# At most this many calls of one turn run at once: a model that reads twelve files in one
# turn gets its results in the time of three rounds of four, not twelve one after another,
# without opening twelve requests at once on one MCP server (a child process the user
# started, each call maybe a process or a fetch of its own); the rest wait, in order, for a
# call to end.
MAX_PARALLEL_CALLS = 4


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


# None: a turn is being written, or the calls handed out to run are waited on
Step = StartTurn | AskApproval | RunCall | Finished | None


@dataclass(frozen=True)
class Stopped:
    """What stop() or close() left of the turn's calls not given back to the model, in their
    order: calls, each one's ran_s (how long it ran before it was stopped; None: it never
    started) and its result if one came, held behind an earlier call's (results; None where
    none came); writing: a turn was being written (its driver cancels the request)."""

    calls: tuple[ToolCall, ...] = ()
    ran_s: tuple[float | None, ...] = ()
    results: tuple[CallFinished | None, ...] = ()
    writing: bool = False

    def left(self) -> list[tuple[ToolCall, float | None, CallFinished | None]]:
        """Each call with its time and result (None where the tuples stop short)."""
        return list(zip_longest(self.calls, self.ran_s, self.results))[:len(self.calls)]


class Phase(enum.Enum):
    TURN_DUE = "turn due"  # the next turn's request is to be sent
    WRITING = "writing"  # the model writes: feed() its deltas
    ASKING = "asking"  # a call waits for the user: answer() (calls approved before it may run)
    RUNNING = "running"  # none left to ask: the calls run, or wait for room to, ran() or failed()
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
        self.answered = 0  # how many of them, in order, have their result in messages
        self.asked = 0  # the one the user is asked about (or is next to be): those before are answered
        self._queued: dict[int, McpTool] = {}  # approved, waiting for room to run (by index, in order)
        self._running: dict[int, tuple[McpTool, float]] = {}  # handed out by steps(), since when
        self._held: dict[int, CallFinished] = {}  # results that came before an earlier call's
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
        """The call the user is asked about."""
        return self.calls[self.asked] if self.phase is Phase.ASKING else None

    def tool_of(self, call: ToolCall) -> McpTool | None:
        """The tool a call runs: among those offered (a format's parse keeps only those)."""
        return self.round.tools.get(call.name) if self.round is not None else None

    @property
    def running(self) -> tuple[ToolCall, ...]:
        """The calls handed out to run that have no result yet, in order."""
        return tuple(self.calls[i] for i in sorted(self._running))

    def steps(self) -> list[Step]:
        """What the driver does now: the calls to start (RunCall, each handed out once: it
        runs from now, until ran() or failed()), then the call to ask the user about
        (AskApproval, said again until answered); or StartTurn, or Finished; none while a
        turn is written, or while only running calls are waited on."""
        if self.phase not in (Phase.ASKING, Phase.RUNNING):
            step = self._turn_step()
            return [step] if step is not None else []
        out: list[Step] = []
        for i in self._due():
            out.append(self._run_step(i))
            self._running[i] = (self._queued.pop(i), self.clock())
        ask = self._ask_step()
        return out + [ask] if ask is not None else out

    def _turn_step(self) -> Step:
        if self.phase is Phase.TURN_DUE:
            return StartTurn(self.round)
        return None if self.phase is Phase.WRITING else Finished()

    def _due(self) -> list[int]:
        """The approved calls there is room for now, in order."""
        return sorted(self._queued)[:max(0, MAX_PARALLEL_CALLS - len(self._running))]

    def _run_step(self, i: int) -> RunCall:
        call = self.calls[i]
        tool = self._queued[i] if i in self._queued else self._running[i][0]
        return RunCall(call, tool, json.loads(call.arguments))

    def _ask_step(self) -> AskApproval | None:
        call = self.current()
        return AskApproval(call, self.tool_of(call)) if call is not None else None

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
        self.calls, self.answered, self.asked = calls, 0, 0
        self._queued, self._running, self._held = {}, {}, {}
        return self._enter_call()

    def _enter_call(self) -> list[AgentEvent]:
        """The calls from the one asked on, in order: each said (CallStarted), those of a tool
        always allowed queued to run at once, up to the first the user is asked about."""
        out: list[AgentEvent] = []
        while self.asked < len(self.calls):
            call = self.calls[self.asked]
            tool = self.tool_of(call)
            out.append(CallStarted(call, tool))
            if tool is None or not self.approvals.always_allowed(tool):
                self.phase = Phase.ASKING
                return out
            self._queued[self.asked] = tool
            self.asked += 1
        if self.answered < len(self.calls):  # else the next turn is due already (_finish_call)
            self.phase = Phase.RUNNING
        return out

    def answer(self, approval: Approval) -> list[AgentEvent]:
        """The user's answer to the call asked about: run it (once, or always for its tool)
        or tell the model it was denied; then the next call is asked about. A tool gone
        meanwhile is an error result."""
        call = self.current()
        if call is None:
            return []
        i, tool = self.asked, self.tool_of(call)
        out: list[AgentEvent] = []
        if approval is Approval.DENY:
            out = self._finish_call(i, ToolResult(DENIED, is_error=True), denied=True)
        elif tool is None:
            out = self._finish_call(i, unavailable(call))
        else:
            if approval is Approval.ALWAYS:
                self.approvals.allow_always(tool)
            self._queued[i] = tool
        self.asked += 1
        return out + self._enter_call()

    def ran(self, result: ToolResult, call_id: str) -> list[AgentEvent]:
        """A call's result (an error result is given to the model as such), by its id."""
        i = self._approved(call_id)
        if i is None:
            return []  # stopped meanwhile, or already answered: the result is not wanted
        self._queued.pop(i, None)
        self._running.pop(i, None)
        return self._finish_call(i, result)

    def failed(self, exc: BaseException, call_id: str) -> list[AgentEvent]:
        """The call raised: the model reads why, as the call's error result."""
        i = self._approved(call_id)
        since = self._running[i][1] if i is not None and i in self._running else self.clock()
        return self.ran(error_result(f"the call failed: {exc}", self.clock() - since), call_id)

    def held(self, call_id: str) -> CallFinished | None:
        """A call's result that came before an earlier call's, held until that one's is in."""
        return next((f for f in self._held.values() if f.call.id == call_id), None)

    def _approved(self, call_id: str) -> int | None:
        """The index of a call approved and without a result (running, or waiting for room)."""
        if self.phase not in (Phase.ASKING, Phase.RUNNING):
            return None
        return next((i for i in [*self._running, *self._queued] if self.calls[i].id == call_id), None)

    def _finish_call(self, i: int, result: ToolResult, denied: bool = False) -> list[AgentEvent]:
        """Call i's result: held until every call before it has its result, then given to the
        model (messages) with theirs, in the calls' order; after the last, the next turn is due."""
        call = self.calls[i]
        self._held[i] = CallFinished(call, self.tool_of(call), result, denied)
        out: list[AgentEvent] = []
        while self.answered in self._held:
            finished = self._held.pop(self.answered)
            self.messages.append({"role": "tool", "tool_call_id": finished.call.id,
                                  "content": result_content(finished.result)})
            out.append(finished)
            self.answered += 1
        if self.answered == len(self.calls):
            self.round = self.round.next() if self.round is not None else None
            self.phase = Phase.TURN_DUE
        return out

    # ----- the end --------------------------------------------------------------------------

    def stop(self) -> Stopped:
        """The user stopped the loop: a turn being written is to be cancelled; every call not
        given back to the model is left: those running as stopped, the rest as not run (a
        result that came, held behind an earlier call's, with it)."""
        return self._end(range(self.answered, len(self.calls)))

    def close(self) -> Stopped:
        """Its chat closed: the calls up to the last one started or denied are left as stop()
        leaves them; those after it (asked about, or waiting for room to run) stay without a
        result, to be asked again (resume) when it opens, so their results still follow the
        others' in the calls' order."""
        started = [i for i in range(self.answered, len(self.calls)) if i in self._running or i in self._held]
        return self._end(range(self.answered, max(started) + 1) if started else range(0))

    def _end(self, left: range) -> Stopped:
        phase, self.phase = self.phase, Phase.DONE
        if phase not in (Phase.ASKING, Phase.RUNNING):
            return Stopped(writing=phase is Phase.WRITING)
        now = self.clock()
        ran_s = tuple(now - self._running[i][1] if i in self._running else None for i in left)
        stopped = Stopped(tuple(self.calls[i] for i in left), ran_s, tuple(self._held.get(i) for i in left))
        self._queued, self._running, self._held = {}, {}, {}
        return stopped
