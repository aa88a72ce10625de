"""A tool round's rows through ConversationSession on a real SQLite file: the calls a reply
made, each call's result (ran, failed, denied), the calls a stop left without one, and the
terminal's whole turns, as the window's tool rounds and `chorus chat --mcp` both store them."""

from __future__ import annotations

from app.conversations import ConversationSession
from app.tools import DENIED, CallFinished, ToolCall, ToolResult, TurnDone
from app.tools.history import NOT_RUN, STOPPED, unanswered_calls
from app.tools.machine import Stopped
from inference import Delta, FinishReason, RequestStats
from storage import MessageStatus, ToolCallRecord, ToolResultRecord

ADD = ToolCall("call_1", "add", '{"a": 2, "b": 3}')
MUL = ToolCall("call_2", "mul", '{"a": 2, "b": 3}')
ADD3 = ToolCall("call_3", "add", '{"a": 5, "b": 6}')


def session(repo) -> ConversationSession:
    conv = repo.create_conversation(title="Tools")
    return ConversationSession(repo, conv.id, lambda c: f"model-of-{c.id}")


def replied_with_calls(repo, s: ConversationSession, *calls: ToolCall) -> int:
    """A sent question whose streamed reply ended as calls, stored as the window stores it."""
    started = s.send("Add 2 and 3, then multiply them.")
    written = "".join(f"<tool_call>{c.name}</tool_call>" for c in calls)
    repo.finish_reply(started.reply.id, written)
    s.record_calls(started.reply.id, calls, written)
    return started.reply.id


def test_record_calls_keeps_the_calls_empties_the_text_and_remembers_how_they_were_written(repo):
    s = session(repo)
    reply_id = replied_with_calls(repo, s, ADD, MUL)

    reply = s.active_path().messages[-1]
    assert reply.id == reply_id and reply.content == ""
    assert reply.tool_calls == (ToolCallRecord("call_1", "add", ADD.arguments),
                                ToolCallRecord("call_2", "mul", MUL.arguments))
    assert s.call_texts[reply_id] == "<tool_call>add</tool_call><tool_call>mul</tool_call>"
    assert unanswered_calls(s.active_path().messages) == (ADD, MUL)


def test_record_result_writes_the_tool_row_after_the_parent_as_the_model_read_it(repo):
    s = session(repo)
    reply_id = replied_with_calls(repo, s, ADD, MUL)

    first = s.record_result(CallFinished(ADD, None, ToolResult("5", duration_s=0.01234)), after=reply_id)
    failed = s.record_result(CallFinished(MUL, None, ToolResult("no such tool", is_error=True, cut_chars=7)),
                             after=first.id)

    assert (first.role, first.parent_id, first.content) == ("tool", reply_id, "5")
    assert first.tool_result == ToolResultRecord("call_1", "add", duration_s=0.012)
    assert (failed.parent_id, failed.content) == (first.id, "Error: no such tool")
    assert failed.tool_result == ToolResultRecord("call_2", "mul", is_error=True, duration_s=0.0, cut_chars=7)
    path = s.active_path().messages
    assert [m.id for m in path[-2:]] == [first.id, failed.id]
    assert unanswered_calls(path) == ()


def test_a_denied_call_is_stored_as_the_denial_the_model_reads(repo):
    s = session(repo)
    reply_id = replied_with_calls(repo, s, ADD)

    denial = s.record_result(CallFinished(ADD, None, ToolResult(DENIED, is_error=True), denied=True), after=reply_id)

    assert denial.content == DENIED
    assert denial.tool_result == ToolResultRecord("call_1", "add", is_error=True, denied=True, duration_s=0.0)


def test_record_result_without_a_parent_goes_at_the_end_of_the_branch(repo):
    s = session(repo)
    reply_id = replied_with_calls(repo, s, ADD)

    row = s.record_result(CallFinished(ADD, None, ToolResult("5")))

    assert row.parent_id == reply_id and s.active_path().messages[-1].id == row.id


def test_record_unanswered_stores_each_call_a_stop_left_in_order(repo):
    s = session(repo)
    reply_id = replied_with_calls(repo, s, ADD, MUL)

    last = s.record_unanswered(Stopped((ADD, MUL), ran_s=(1.23456, None)), after=reply_id)

    running, never = s.active_path().messages[-2:]
    assert last is not None and last.id == never.id
    assert (running.parent_id, running.content) == (reply_id, STOPPED)
    assert running.tool_result == ToolResultRecord("call_1", "add", duration_s=1.235, cancelled=True)
    assert (never.parent_id, never.content) == (running.id, NOT_RUN)
    assert never.tool_result == ToolResultRecord("call_2", "mul", cancelled=True)
    assert unanswered_calls(s.active_path().messages) == ()


def test_record_unanswered_stores_a_result_held_behind_a_stopped_call_in_its_place(repo):
    """Calls run at once: the second's result came while the first ran, and Stop came
    before the first's; the second's row is its result, after the first's stopped one."""
    s = session(repo)
    reply_id = replied_with_calls(repo, s, ADD, MUL, ADD3)

    held = CallFinished(MUL, None, ToolResult("6", duration_s=0.5))
    s.record_unanswered(Stopped((ADD, MUL, ADD3), ran_s=(2.0, None, 1.0), results=(None, held, None)), after=reply_id)

    rows = s.active_path().messages[-3:]
    assert [(m.content, m.tool_result.call_id, m.tool_result.cancelled) for m in rows] == \
        [(STOPPED, "call_1", True), ("6", "call_2", False), (STOPPED, "call_3", True)]
    assert rows[1].tool_result.duration_s == 0.5 and rows[1].parent_id == rows[0].id


def test_record_unanswered_with_no_calls_writes_nothing(repo):
    s = session(repo)
    reply_id = replied_with_calls(repo, s, ADD)

    assert s.record_unanswered(Stopped(), after=reply_id) is None
    assert s.active_path().messages[-1].id == reply_id


def test_record_turn_stores_the_terminals_turns_with_their_calls_status_and_stats(repo):
    s = session(repo)
    user = s.ask("Add 2 and 3.")
    stats = RequestStats(prompt_tokens=40, cached_tokens=0, generated_tokens=12, queue_s=0.0, ttft_s=0.05,
                         decode_tok_s=80.0, itl_p50_s=None, itl_p95_s=None, total_s=0.2)
    calls = s.record_turn(TurnDone("", (ADD,), Delta("r1", finish_reason=FinishReason.STOP, stats=stats)))
    result = s.record_result(CallFinished(ADD, None, ToolResult("5")))
    answer = s.record_turn(TurnDone("It is 5.", (), Delta("r2", finish_reason=FinishReason.STOP)))
    stopped = s.record_turn(TurnDone("Half", (), Delta("", finish_reason=FinishReason.CANCELLED)))

    assert [m.id for m in s.active_path().messages] == [user.id, calls.id, result.id, answer.id, stopped.id]
    assert calls.parent_id == user.id and result.parent_id == calls.id and answer.parent_id == result.id
    assert calls.tool_calls == (ToolCallRecord("call_1", "add", ADD.arguments),)
    assert calls.model == f"model-of-{s.conversation_id}" and calls.status is MessageStatus.COMPLETE
    assert (calls.prompt_tokens, calls.completion_tokens, calls.ttft_s, calls.tokens_per_s) == (40, 12, 0.05, 80.0)
    assert (answer.content, answer.tool_calls, answer.prompt_tokens) == ("It is 5.", (), None)
    assert stopped.parent_id == answer.id and stopped.status is MessageStatus.STOPPED


def test_a_turn_without_a_finish_reason_is_kept_as_an_error(repo):
    s = session(repo)
    s.ask("Hi")
    turn = s.record_turn(TurnDone("", (), Delta("r", error="engine went away")))
    assert turn.status is MessageStatus.ERROR and turn.error_text == "engine went away"
