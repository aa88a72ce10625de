"""The tool loop driven blocking, for the terminal (`chorus chat --tools`, app/cli/chat_tools.py)
and the benchmarks: a thin driver over the one state machine (machine.py) on the caller's
thread. It streams each turn through the engine client, asks the approver, runs the calls of
a turn on the toolbox at once (a few threads: the approver is asked about the next call while
those approved run), and yields the machine's events for the caller to show and store, the
calls' results in the calls' order."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait

from app.tools.formats import GENERIC, ToolFormat
from app.tools.machine import (
    DENIED,
    MAX_PARALLEL_CALLS,
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
from app.tools.mcp_results import McpTool, ToolResult
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
        running: dict[str, Future[ToolResult]] = {}  # by call id
        # Threads, as the toolbox's calls block; the machine hands out no more than this at once.
        pool = ThreadPoolExecutor(MAX_PARALLEL_CALLS, thread_name_prefix="tool-call")
        try:
            while True:
                yield from self._results(running, block=False)  # room for the calls waiting to run
                steps = machine.steps()
                for step in steps:
                    if isinstance(step, RunCall):
                        running[step.call.id] = pool.submit(self.toolbox.call, step.call.name, step.arguments)
                step = steps[-1] if steps else None
                if isinstance(step, StartTurn):
                    yield from self._turn(step.round)
                elif isinstance(step, AskApproval):
                    assert step.tool is not None  # a parsed call names a tool offered
                    yield from machine.answer(self.approve(step.call, step.tool))
                elif running:
                    yield from self._results(running, block=True)
                else:
                    return
        finally:  # a stopped loop's calls end on their own (the toolbox's timeout); nothing waits on them
            pool.shutdown(wait=False, cancel_futures=True)

    def _results(self, running: dict[str, Future[ToolResult]], block: bool) -> Iterator[AgentEvent]:
        """The results of the calls that ended (block: of at least one) given to the machine."""
        done = wait(running.values(), return_when=FIRST_COMPLETED)[0] if block and running else ()
        for call_id, future in list(running.items()):
            if future in done or future.done():
                del running[call_id]
                exc = future.exception()
                # a tool's failure is the model's to read, not the chat's end
                yield from self.machine.failed(exc, call_id) if exc is not None \
                    else self.machine.ran(future.result(), call_id)

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
