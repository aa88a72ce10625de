"""The generic tool format's turns (app/tools/prompt.py): a call goes back into the prompt as
the model wrote it when the loop kept that text, else written by json.dumps; results join
into one user turn."""

from __future__ import annotations

from app.tools import plain_turns

CALL = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 4, "b": 9}'}}


def test_a_call_the_loop_kept_the_text_of_is_shown_as_written():
    written = '{ "name": "add", "arguments": { "a": 4, "b": 9 } }'
    turns = plain_turns([{"role": "user", "content": "4 + 9?"},
                         {"role": "assistant", "content": "", "written": written, "tool_calls": [CALL]},
                         {"role": "tool", "tool_call_id": "c1", "content": "13"}])
    assert turns[1] == {"role": "assistant", "content": written}
    assert turns[2] == {"role": "user", "content": "The result of add (call c1):\n13"}


def test_a_call_without_its_text_is_written_again():
    turns = plain_turns([{"role": "assistant", "content": None, "tool_calls": [CALL]},
                         {"role": "tool", "tool_call_id": "c1", "content": "13"},
                         {"role": "tool", "tool_call_id": "c2", "content": "x"}])
    assert turns[0] == {"role": "assistant", "content": '{"name": "add", "arguments": {"a": 4, "b": 9}}'}
    assert turns[1]["content"] == "The result of add (call c1):\n13\n\nThe result of a tool (call c2):\nx"
