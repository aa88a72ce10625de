"""Tool use stored with messages (revision 0008, storage/tool_use.py): an assistant turn's
calls and a tool message's result come back on the active path, survive a branch copy and
a chat file's export and import, and a file with a malformed "tool" field is refused."""

from __future__ import annotations

import json

import pytest

from storage import ChatRepository, ImportRejected, StorageError, ToolCallRecord, ToolResultRecord
from storage.chat_file_format import export_json, import_data

CALL = ToolCallRecord("call_1", "get_current_time", '{"timezone": "UTC"}')
RESULT = ToolResultRecord("call_1", "get_current_time", is_error=False, duration_s=0.25, cut_chars=3)


def _chat(repo: ChatRepository) -> int:
    conv = repo.create_conversation(title="tools").id
    repo.add_message(conv, "user", "What time is it?")
    repo.add_message(conv, "assistant", "", tool_calls=[CALL])
    repo.add_message(conv, "tool", '{"datetime": "2026-12-02T17:00:00+00:00"}', tool_result=RESULT)
    repo.add_message(conv, "assistant", "It is 17:00 UTC.")
    return conv


def _tool_fields(repo: ChatRepository, conv: int) -> list:
    return [(m.role, m.tool_calls, m.tool_result) for m in repo.active_path(conv).messages]


def test_calls_and_results_come_back_on_the_path_and_in_a_branch_copy(db):
    repo = ChatRepository(db)
    conv = _chat(repo)
    expected = [("user", (), None), ("assistant", (CALL,), None), ("tool", (), RESULT), ("assistant", (), None)]
    assert _tool_fields(repo, conv) == expected
    assert repo.get_message(repo.active_path(conv).messages[1].id).tool_calls == (CALL,)  # read alone
    copy = repo.copy_active_path(conv)
    assert _tool_fields(repo, copy.id) == expected


def test_a_chat_file_carries_them_and_refuses_a_malformed_tool_field(db):
    repo = ChatRepository(db)
    conv = _chat(repo)
    exported = export_json(db, [conv])
    messages = exported["conversations"][0]["messages"]
    assert messages[1]["tool"] == {"calls": [{"id": "call_1", "name": "get_current_time",
                                              "arguments": '{"timezone": "UTC"}'}]}
    imported = import_data(db, json.loads(json.dumps(exported))).conversation_ids[0]
    assert _tool_fields(repo, imported)[1:3] == [("assistant", (CALL,), None), ("tool", (), RESULT)]

    messages[1]["tool"] = {"calls": [{"id": 1}]}
    with pytest.raises(ImportRejected, match="tool has calls or a result of the wrong shape"):
        import_data(db, json.loads(json.dumps(exported)))


def test_a_finished_reply_read_as_calls_keeps_them_and_drops_their_text(db):
    repo = ChatRepository(db)
    conv = repo.create_conversation(title="tools").id
    repo.add_message(conv, "user", "What time is it?")
    reply = repo.start_reply(conv)
    with pytest.raises(StorageError):  # still being written
        repo.set_tool_calls(reply.id, [CALL])
    repo.finish_reply(reply.id, '{"name": "get_current_time", "arguments": {"timezone": "UTC"}}')
    stored = repo.set_tool_calls(reply.id, [CALL])
    assert (stored.content, stored.tool_calls) == ("", (CALL,))
    assert repo.active_path(conv).messages[-1].tool_calls == (CALL,)
    with pytest.raises(StorageError):
        repo.set_tool_calls(reply.id, [])
