"""A branch's calls without a result (issue 39, defect 2): found at its end to be asked
again, answered "not run" in any prompt that goes on past them, and a stopped call's record
kept through storage's JSON as it was."""

from __future__ import annotations

from datetime import datetime, timezone

from app.chats.markdown_export import tool_outcome
from app.tools import ToolCall
from app.tools.history import NOT_RUN, STOPPED, answer_every_call, not_run_record, unanswered_calls
from storage import MessageRecord, MessageStatus, ToolCallRecord, ToolResultRecord
from storage.tool_use import tool_from_json, tool_to_json

CALLS = (ToolCallRecord("c1", "add", '{"a": 1}'), ToolCallRecord("c2", "now", "{}"))


def _message(ident: int, role: str, calls=(), result=None) -> MessageRecord:
    now = datetime.now(timezone.utc)
    return MessageRecord(ident, 1, ident - 1 or None, role, "", MessageStatus.COMPLETE, None, None, None, None, None,
                         None, now, now, tool_calls=calls, tool_result=result)


def test_the_calls_ending_a_branch_without_a_result_are_found():
    asked, called = _message(1, "user"), _message(2, "assistant", CALLS)
    first = _message(3, "tool", result=ToolResultRecord("c1", "add"))
    assert [c.id for c in unanswered_calls([asked, called])] == ["c1", "c2"]
    assert [c.id for c in unanswered_calls([asked, called, first])] == ["c2"]
    assert unanswered_calls([asked, called, first, _message(4, "tool", result=ToolResultRecord("c2", "now"))]) == ()
    assert unanswered_calls([asked, called, first, _message(4, "assistant")]) == (), "a reply went on"
    assert unanswered_calls([asked]) == ()


def test_a_prompt_answers_every_call_left_without_a_result():
    call = {"role": "assistant", "content": "", "tool_calls": [
        ToolCall("c1", "add", "{}").openai(), ToolCall("c2", "now", "{}").openai()]}
    done = {"role": "tool", "tool_call_id": "c1", "content": "1"}
    later = {"role": "user", "content": "Never mind."}
    answered = answer_every_call([{"role": "user", "content": "Go"}, call, done, later])
    assert answered[2:5] == [done, {"role": "tool", "tool_call_id": "c2", "content": NOT_RUN}, later]
    at_the_end = answer_every_call([call])
    assert [m.get("tool_call_id") for m in at_the_end[1:]] == ["c1", "c2"]
    whole = [call, done, {"role": "tool", "tool_call_id": "c2", "content": "noon"}]
    assert answer_every_call(whole) == whole


def test_a_stopped_call_is_stored_and_read_back_as_stopped():
    text, record = not_run_record(ToolCall("c1", "add", "{}"))
    assert (text, tool_outcome(record)) == (NOT_RUN, "cancelled — not run")
    text, ran = not_run_record(ToolCall("c1", "add", "{}"), ran_s=1.25)
    assert (text, tool_outcome(ran), ran.duration_s) == (STOPPED, "stopped before its result", 1.25)
    assert tool_from_json(tool_to_json((), ran)) == ((), ran)
    plain = ToolResultRecord("c1", "add", duration_s=0.5)
    assert "cancelled" not in tool_to_json((), plain), "other results are written as before"
    assert tool_from_json(tool_to_json((), plain)) == ((), plain)
