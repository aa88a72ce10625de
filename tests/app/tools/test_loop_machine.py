"""The tool loop's state machine (app/tools/machine.py) step by step, fed by hand as the
window feeds it (deltas, the user's answers, a call's result), without a model or a server:
a call approved and run, a denial, a tool's error, the rounds running out, a stop mid-turn
and mid-call, "always" remembered, calls asked again after a restart; a turn's calls at
once, their results in order. And its blocking driver (agent.ToolLoop) over a scripted
engine: a tool that raises, a loop closed mid-turn, three calls run at once on the test MCP
server."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from app.tools import Toolbox
from app.tools.agent import ToolLoop
from app.tools.machine import (
    DENIED,
    MAX_PARALLEL_CALLS,
    Approval,
    ApprovedTools,
    AskApproval,
    CallFinished,
    CallStarted,
    Finished,
    Notice,
    Phase,
    RunCall,
    StartTurn,
    Step,
    TextDelta,
    ToolLoopMachine,
    TurnDone,
    result_content,
)
from app.tools.mcp_results import McpTool, ToolResult
from app.tools.rounds import ToolRound
from app.tools.types import Tool, ToolCall
from inference import Delta, FinishReason, SamplingParams

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
ADD = McpTool("test", "add", "Add two numbers", SCHEMA)
ADD_CALL = '{"name": "add", "arguments": {"a": 2, "b": 3}}'


def _round(max_rounds: int = 5, choice: str = "auto") -> ToolRound:
    first = ToolRound.offer({"add": ADD}, [Tool("add", ADD.description, SCHEMA)], choice=choice, max_rounds=max_rounds)
    assert first is not None
    return first


def _write(machine: ToolLoopMachine, *pieces: str, finish: FinishReason = FinishReason.STOP) -> list:
    """One turn written as pieces, then ended."""
    assert isinstance(_next(machine), StartTurn)
    events = machine.begin_turn()
    for piece in pieces:
        events += machine.feed(Delta("r", text=piece, token_ids=(1,)))
    return events + machine.feed(Delta.finished_with("r", finish))


def _next(machine: ToolLoopMachine) -> Step | None:
    """What the driver does next: the first of steps() (a RunCall is handed out by it)."""
    steps = machine.steps()
    return steps[0] if steps else None


def _first_approved(machine: ToolLoopMachine) -> ToolCall:
    """The first approved call without a result (steps() hands out those due to run)."""
    machine.steps()
    return machine.running[0]


def _ran_first(machine: ToolLoopMachine, result: ToolResult) -> list:
    return machine.ran(result, _first_approved(machine).id)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_call_is_asked_about_run_and_its_result_starts_the_next_round():
    messages = [{"role": "user", "content": "2 + 3?"}]
    machine = ToolLoopMachine(_round(), messages=messages)
    assert _next(machine) == StartTurn(machine.round) and machine.round.round == 0
    events = _write(machine, '{"name": "add", ', '"arguments": {"a": 2, "b": 3}}')
    assert not any(isinstance(e, TextDelta) for e in events), "a call's text is held back, never shown"
    turn = next(e for e in events if isinstance(e, TurnDone))
    assert turn.text == "" and turn.written == ADD_CALL and [c.name for c in turn.calls] == ["add"]
    assert isinstance(events[-1], CallStarted) and events[-1].tool == ADD
    step = _next(machine)
    assert isinstance(step, AskApproval) and step.tool == ADD and machine.phase is Phase.ASKING

    assert machine.answer(Approval.ONCE) == []
    step = _next(machine)
    assert isinstance(step, RunCall) and step.arguments == {"a": 2, "b": 3} and step.tool == ADD
    events = machine.ran(ToolResult("5", duration_s=0.1), step.call.id)
    assert [type(e) for e in events] == [CallFinished] and events[0].result.text == "5"
    step = _next(machine)
    assert isinstance(step, StartTurn) and step.round is not None and step.round.round == 1
    assert messages[1]["tool_calls"][0]["function"]["name"] == "add" and messages[1]["written"] == ADD_CALL
    assert messages[2] == {"role": "tool", "tool_call_id": turn.calls[0].id, "content": "5"}

    events = _write(machine, "2 + 3 ", "is 5.")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "2 + 3 is 5."
    assert isinstance(_next(machine), Finished) and messages[-1] == {"role": "assistant", "content": "2 + 3 is 5."}


def test_a_denied_call_goes_back_as_its_result_and_nothing_runs():
    machine = ToolLoopMachine(_round())
    _write(machine, ADD_CALL)
    events = machine.answer(Approval.DENY)
    [finished] = [e for e in events if isinstance(e, CallFinished)]
    assert finished.denied and finished.result.text == DENIED and result_content(finished.result) == DENIED
    assert isinstance(_next(machine), StartTurn), "the model is told, and goes on"
    assert machine.messages[-1]["content"] == DENIED


def test_a_tools_error_and_a_raising_call_are_results_the_model_reads():
    machine = ToolLoopMachine(_round(), clock=Clock())
    _write(machine, f"[{ADD_CALL}, {ADD_CALL}]")  # two calls in one turn
    [asked] = machine.answer(Approval.ONCE)
    assert isinstance(asked, CallStarted), "the second call is asked about while the first runs"
    [first] = _ran_first(machine, ToolResult("no such number", is_error=True))
    assert isinstance(first, CallFinished)
    assert machine.messages[-1]["content"] == "Error: no such number"
    machine.answer(Approval.ONCE)
    [second] = machine.failed(RuntimeError("the server went away"), _first_approved(machine).id)
    assert isinstance(second, CallFinished) and second.result.is_error
    assert "the server went away" in machine.messages[-1]["content"]
    assert isinstance(_next(machine), StartTurn)


def test_the_last_round_offers_no_call_so_an_answer_comes():
    machine = ToolLoopMachine(_round(max_rounds=2))
    _write(machine, ADD_CALL)
    machine.answer(Approval.ONCE)
    _ran_first(machine, ToolResult("5"))
    assert machine.round.round == 1 and not machine.calling
    events = _write(machine, ADD_CALL)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == ADD_CALL, "shown as text, as it came"
    assert [e.calls for e in events if isinstance(e, TurnDone)] == [()]
    assert isinstance(_next(machine), Finished)


def test_a_reply_cut_short_or_failed_is_no_call():
    for finish in (FinishReason.LENGTH, FinishReason.ERROR, FinishReason.CANCELLED):
        machine = ToolLoopMachine(_round())
        events = _write(machine, ADD_CALL, finish=finish)
        assert [e.calls for e in events if isinstance(e, TurnDone)] == [()] and isinstance(_next(machine), Finished)


def test_stop_mid_turn_says_to_cancel_and_a_late_delta_changes_nothing():
    machine = ToolLoopMachine(_round())
    machine.begin_turn()
    machine.feed(Delta("r", text='{"name": "ad'))
    assert machine.holding and _next(machine) is None
    stopped = machine.stop()
    assert stopped.writing and stopped.calls == ()
    assert machine.feed(Delta.finished_with("r", FinishReason.CANCELLED)) == []
    assert isinstance(_next(machine), Finished) and machine.messages == []


def test_stop_while_a_call_runs_leaves_it_and_the_rest_without_results():
    clock = Clock()
    machine = ToolLoopMachine(_round(), clock=clock)
    _write(machine, f"[{ADD_CALL}, {ADD_CALL}]")
    machine.answer(Approval.ONCE)
    [run, _ask] = machine.steps()
    clock.now += 2.5
    stopped = machine.stop()
    assert len(stopped.calls) == 2 and stopped.ran_s == (2.5, None) and not stopped.writing
    assert machine.ran(ToolResult("5"), run.call.id) == [], "a result after the stop is not wanted"
    assert isinstance(_next(machine), Finished)


def test_close_gives_up_the_running_call_only_and_keeps_the_asked_ones_for_later():
    asking = ToolLoopMachine(_round())
    _write(asking, ADD_CALL)
    assert asking.close().calls == ()  # asked again when the chat opens
    running = ToolLoopMachine(_round(), clock=Clock())
    _write(running, f"[{ADD_CALL}, {ADD_CALL}]")
    running.answer(Approval.ONCE)
    running.steps()
    closed = running.close()
    assert len(closed.calls) == 1 and closed.ran_s == (0.0,)


def test_always_runs_the_tools_next_calls_without_asking():
    memory = ApprovedTools()
    machine = ToolLoopMachine(_round(), memory)
    _write(machine, ADD_CALL)
    machine.answer(Approval.ALWAYS)
    assert memory.always_allowed(ADD)
    _ran_first(machine, ToolResult("5"))
    _write(machine, ADD_CALL)
    assert isinstance(_next(machine), RunCall), "not asked again"


def test_a_required_call_is_forced_on_the_first_turn_only_and_an_unforcible_one_is_said():
    first = _round(choice="required")
    assert first.sampling(SamplingParams()).grammar is not None
    assert first.next().sampling(SamplingParams()).grammar is None
    odd = McpTool("test", "wait", "Wait", {"type": "object",
                                           "properties": {"s": {"type": "number", "not": {"const": 0}}}})
    unforced = ToolRound.offer({"wait": odd}, [Tool("wait", "Wait", odd.input_schema)], choice="required")
    assert unforced is not None and unforced.grammar is None
    machine = ToolLoopMachine(unforced)
    [notice] = machine.begin_turn()
    assert isinstance(notice, Notice) and "not forced" in notice.text


def test_calls_asked_again_after_a_restart_resume_where_they_were():
    call = ToolCall("call_1", "add", json.dumps({"a": 1, "b": 1}))
    machine = ToolLoopMachine.resume((call,), _round())
    assert _next(machine) == AskApproval(call, ADD)
    gone = ToolLoopMachine.resume((call,), None)  # the chat's tools are off now
    [finished] = gone.answer(Approval.ONCE)
    assert isinstance(finished, CallFinished) and "is not available" in finished.result.text
    assert _next(gone) == StartTurn(None), "the reply goes on, offered no tools"


# ----- the calls of one turn, at once -----------------------------------------------------------


def _turn_of(machine: ToolLoopMachine, n: int) -> tuple[ToolCall, ...]:
    """A turn of n calls to add (a = 1..n) written and ended: its calls."""
    events = _write(machine, "[" + ", ".join(json.dumps({"name": "add", "arguments": {"a": a, "b": 0}})
                                             for a in range(1, n + 1)) + "]")
    [turn] = [e for e in events if isinstance(e, TurnDone)]
    assert len(turn.calls) == n
    return turn.calls


def _always() -> ApprovedTools:
    memory = ApprovedTools()
    memory.allow_always(ADD)
    return memory


def test_three_calls_run_at_once_and_their_results_go_to_the_model_in_the_calls_order():
    machine = ToolLoopMachine(_round(), _always())
    calls = _turn_of(machine, 3)
    runs = machine.steps()
    assert [s.call for s in runs if isinstance(s, RunCall)] == list(calls), "all three handed out at once"
    assert machine.steps() == [], "each handed out once; the loop waits on their results"
    assert machine.running == calls

    assert machine.ran(ToolResult("3"), calls[2].id) == [], "held: the first two have no result yet"
    [first] = machine.ran(ToolResult("1"), calls[0].id)
    assert first.call == calls[0] and machine.running == calls[1:2]
    assert machine.steps() == [], "the next turn waits for every result"
    events = machine.ran(ToolResult("2"), calls[1].id)
    assert [(e.call, e.result.text) for e in events] == [(calls[1], "2"), (calls[2], "3")]
    assert [(m["tool_call_id"], m["content"]) for m in machine.messages[1:]] == \
        [(calls[0].id, "1"), (calls[1].id, "2"), (calls[2].id, "3")]
    assert machine.steps() == [StartTurn(machine.round)] and machine.round.round == 1
    assert machine.ran(ToolResult("again"), calls[1].id) == [], "a call answered once is answered"


def test_no_more_than_max_parallel_calls_run_at_once_the_rest_start_in_order_as_calls_end():
    machine = ToolLoopMachine(_round(), _always())
    calls = _turn_of(machine, MAX_PARALLEL_CALLS + 2)
    assert [s.call for s in machine.steps()] == list(calls[:MAX_PARALLEL_CALLS])
    machine.ran(ToolResult("2"), calls[1].id)
    assert [s.call for s in machine.steps()] == [calls[MAX_PARALLEL_CALLS]], "one ended: room for one"
    assert machine.steps() == []
    machine.failed(RuntimeError("gone"), calls[3].id)
    assert [s.call for s in machine.steps()] == [calls[MAX_PARALLEL_CALLS + 1]]
    assert len(machine.running) == MAX_PARALLEL_CALLS


def test_an_approved_call_runs_while_the_next_is_asked_and_a_denial_between_keeps_the_order():
    machine = ToolLoopMachine(_round(), clock=Clock())
    calls = _turn_of(machine, 3)
    assert machine.steps() == [AskApproval(calls[0], ADD)]
    assert machine.answer(Approval.ONCE) == [CallStarted(calls[1], ADD)]
    assert machine.steps() == [RunCall(calls[0], ADD, {"a": 1, "b": 0}), AskApproval(calls[1], ADD)]
    assert machine.answer(Approval.DENY) == [CallStarted(calls[2], ADD)], "denied: held behind the first"
    machine.answer(Approval.ONCE)
    assert machine.phase is Phase.RUNNING and machine.steps() == [RunCall(calls[2], ADD, {"a": 3, "b": 0})]
    assert machine.ran(ToolResult("3"), calls[2].id) == []
    events = machine.ran(ToolResult("1"), calls[0].id)
    assert [(e.call, e.denied) for e in events] == [(calls[0], False), (calls[1], True), (calls[2], False)]
    assert [m["content"] for m in machine.messages[1:]] == ["1", DENIED, "3"]
    assert isinstance(_next(machine), StartTurn)


def test_stop_while_two_calls_run_says_each_ones_time_a_held_result_and_the_calls_never_run():
    clock = Clock()
    machine = ToolLoopMachine(_round(), clock=clock)
    calls = _turn_of(machine, 4)
    machine.answer(Approval.ONCE)
    machine.steps()  # the first runs from 100 s
    clock.now += 1.0
    machine.answer(Approval.ONCE)
    machine.steps()  # the second from 101 s
    machine.answer(Approval.ONCE)
    machine.steps()  # the third from 101 s: asking about the fourth
    machine.ran(ToolResult("3", duration_s=0.2), calls[2].id)  # held behind the two running
    clock.now += 2.0
    stopped = machine.stop()
    assert stopped.calls == calls and stopped.ran_s == (3.0, 2.0, None, None)
    assert [r.result.text if r else None for r in stopped.results] == [None, None, "3", None]
    assert machine.messages[-1]["role"] == "assistant", "nothing of theirs went to the model"
    assert machine.ran(ToolResult("1"), calls[0].id) == [] and isinstance(_next(machine), Finished)


def test_close_leaves_the_calls_up_to_the_last_started_and_keeps_the_rest_to_be_asked_again():
    machine = ToolLoopMachine(_round(), clock=Clock())
    calls = _turn_of(machine, 4)
    machine.answer(Approval.ONCE)
    machine.answer(Approval.ONCE)
    machine.steps()  # the first two run; the third is asked about
    machine.ran(ToolResult("1"), calls[0].id)
    closed = machine.close()
    assert closed.calls == calls[1:2] and closed.ran_s == (0.0,)
    assert [m.get("tool_call_id") for m in machine.messages[1:]] == [calls[0].id]


# ----- the blocking driver --------------------------------------------------------------------


class Scripted:
    """Hands out the replies in order, each a finished request; the chats and cancels kept."""

    info = SimpleNamespace(chat_template=None)

    def __init__(self, *replies: str, finish: bool = True) -> None:
        self.replies, self.sent, self.cancelled, self.finish = list(replies), [], [], finish

    def stream(self, chat, sink) -> str:
        self.sent.append(chat)
        sink(Delta(chat.request_id, text=self.replies.pop(0), token_ids=(1,)))
        if self.finish:
            sink(Delta.finished_with(chat.request_id, FinishReason.STOP))
        return chat.request_id

    def cancel(self, request_id: str) -> None:
        self.cancelled.append(request_id)


class Box:
    """A toolbox whose add raises."""

    by_name = {"add": ADD}

    def __bool__(self) -> bool:
        return True

    def specs(self) -> tuple[Tool, ...]:
        return (Tool("add", ADD.description, SCHEMA),)

    def call(self, name: str, arguments: dict) -> ToolResult:
        raise ConnectionError("the server hung up")


def test_the_driver_gives_a_raising_tool_back_to_the_model_as_an_error():
    engine = Scripted(ADD_CALL, "It failed.")
    messages = [{"role": "user", "content": "2 + 3?"}]
    events = list(ToolLoop(engine, Box(), messages, SamplingParams.greedy(16)).run())
    [finished] = [e for e in events if isinstance(e, CallFinished)]
    assert finished.result.is_error and "the server hung up" in finished.result.text
    assert "the server hung up" in engine.sent[1].messages[-1]["content"]
    assert messages[-1] == {"role": "assistant", "content": "It failed."}


def test_the_driver_runs_a_turns_calls_at_once_and_gives_their_results_in_the_calls_order(manager, test_server):
    """Three calls of one turn to the test server's slow tool, the first the longest: they
    run at once (each one's span, on the server's clock, overlaps the others'), and their
    results come back, printed and given to the model, in the calls' order."""
    manager.start(test_server).result(30)
    toolbox = Toolbox(manager, [t for t in manager.tools() if t.name == "slow"], timeout_s=20)
    turn = [{"name": "slow", "arguments": {"seconds": s, "clock": True}} for s in (0.8, 0.4, 0.6)]
    engine = Scripted(json.dumps(turn), "Slept.")
    events = list(ToolLoop(engine, toolbox, [{"role": "user", "content": "Sleep."}], SamplingParams.greedy(16)).run())

    finished = [e for e in events if isinstance(e, CallFinished)]
    assert [json.loads(e.call.arguments)["seconds"] for e in finished] == [0.8, 0.4, 0.6]
    spans = [tuple(float(t) for t in e.result.text.split(" from ")[1].split(" to ")) for e in finished]
    assert max(began for began, _ in spans) < min(ended for _, ended in spans), f"one after another: {spans}"
    results = [m["content"] for m in engine.sent[1].messages if "slept" in str(m.get("content"))]
    assert len(results) == 1 and results[0].index("slept 0.8") < results[0].index("slept 0.4") \
        < results[0].index("slept 0.6"), "the model reads them in the calls' order"


def test_the_driver_closed_mid_turn_cancels_the_request():
    engine = Scripted("Once upon", finish=False)
    loop = ToolLoop(engine, Box(), [{"role": "user", "content": "A story."}], SamplingParams.greedy(16))
    run = loop.run()
    assert next(run) == TextDelta("Once upon")
    run.close()
    assert engine.cancelled == [engine.sent[0].request_id] and loop.machine.phase is Phase.DONE


def test_the_driver_refuses_a_bad_choice_and_no_rounds():
    with pytest.raises(ValueError, match="tool_choice"):
        ToolLoop(Scripted(), Box(), [], SamplingParams(), choice="sometimes")
    with pytest.raises(ValueError, match="max_rounds"):
        ToolLoop(Scripted(), Box(), [], SamplingParams(), max_rounds=0)
