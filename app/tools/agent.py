"""The tool loop driven blocking, for the terminal (`chorus chat --tools`, app/cli/chat_tools.py)
and the benchmarks: a thin driver over the one state machine (machine.py) on the caller's
thread. It streams each turn through the engine client, asks the approver, runs each call
on the toolbox, and yields the machine's events for the caller to show and store."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from app.tools.formats import GENERIC, ToolFormat
from app.tools.machine import (
    DENIED,
    AgentEvent,
    Approval,
    ApprovedTools,
    AskApproval,
    CallFinished,
    CallStarted,
    Notice,
    Phase,
    RunCall,
    StartTurn,
    TextDelta,
    ToolLoopMachine,
    TurnDone,
    always_allow,
    result_content,
)
from app.tools.mcp_results import McpTool
from app.tools.prompt import plain_turns
from app.tools.rounds import DEFAULT_MAX_ROUNDS, ToolRound, forced_grammar, plain_request
from app.tools.toolbox import Toolbox
from app.tools.types import ToolCall
from inference import PRIORITY_VISIBLE_TAB, EngineClient, RequestHandle, SamplingParams

__all__ = [
    "DEFAULT_MAX_ROUNDS", "DENIED", "AgentEvent", "Approval", "Approver", "CallFinished", "CallStarted", "Notice",
    "TextDelta", "ToolLoop", "TurnDone", "always_allow", "forced_grammar", "result_content",
]

Approver = Callable[[ToolCall, McpTool], Approval]


class ToolLoop:
    """messages: the chat so far in OpenAI's shape (assistant turns may carry tool_calls,
    {"role": "tool", "tool_call_id", "content"} the results); run() appends to it what each
    round adds, so after the loop it holds the whole exchange. tool_format: the model's
    (app/tools/formats.format_for_template of its chat template); a native one has the
    template write the tools, calls and results, the generic one writes them as text.
    "Always" holds for the rest of the loop."""

    def __init__(self, engine: EngineClient, toolbox: Toolbox, messages: list[dict], sampling: SamplingParams, *,
                 choice: str = "auto", approve: Approver = always_allow, max_rounds: int = DEFAULT_MAX_ROUNDS,
                 parallel: bool = True, priority: int = PRIORITY_VISIBLE_TAB,
                 tool_format: ToolFormat = GENERIC) -> None:
        self.engine, self.toolbox, self.messages, self.sampling = engine, toolbox, messages, sampling
        self.approve, self.priority = approve, priority
        first = ToolRound.offer(toolbox.by_name, toolbox.specs() if toolbox else (), choice=choice,
                                max_rounds=max_rounds, parallel=parallel, tool_format=tool_format)
        self.approvals = ApprovedTools()
        self.machine = ToolLoopMachine(first, self.approvals, messages)

    @property
    def allowed(self) -> set[str]:
        """The tools approved "always", by the names the model sees."""
        return {name for name, tool in self.toolbox.by_name.items() if self.approvals.always_allowed(tool)}

    def run(self) -> Iterator[AgentEvent]:
        machine = self.machine
        while True:
            step = machine.step
            if isinstance(step, StartTurn):
                yield from self._turn(step.round)
            elif isinstance(step, AskApproval):
                assert step.tool is not None  # a parsed call names a tool offered
                yield from machine.answer(self.approve(step.call, step.tool))
            elif isinstance(step, RunCall):
                try:
                    result = self.toolbox.call(step.call.name, step.arguments)
                except Exception as exc:  # a tool's failure is the model's to read, not the chat's end
                    yield from machine.failed(exc)
                else:
                    yield from machine.ran(result)
            else:
                return

    def _turn(self, round: ToolRound | None) -> Iterator[AgentEvent]:
        request = round.request(self.messages, self.sampling, self.priority) if round is not None \
            else plain_request(self.messages, self.sampling, self.priority)
        handle = RequestHandle.open(self.engine, request)
        yield from self.machine.begin_turn()
        try:
            for delta in handle:
                yield from self.machine.feed(delta)
        finally:
            if self.machine.phase is Phase.WRITING:  # the loop was closed mid-turn
                self.machine.stop()
                handle.cancel()

    def prompt(self) -> list[dict]:
        """The engine's messages for the history so far (the same every round)."""
        round = self.machine.round
        return round.prompt(self.messages) if round is not None else plain_turns(self.messages)
