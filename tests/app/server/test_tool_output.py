"""Replies read back as tool calls, and tool history written as text, in the generic format
(app/server/tool_output.py, tool_prompt.py), on literal model outputs. No model."""

from __future__ import annotations

import json

import pytest

from app.server.errors import ApiError
from app.server.tool_output import might_be_call, parse_calls
from app.server.tool_prompt import plain_messages
from app.server.tool_types import Tool, ToolUse

USE = ToolUse((Tool("get_time", "", {"type": "object"}), Tool("add", "", {"type": "object"})))


@pytest.mark.parametrize("text", [
    '{"name": "get_time", "arguments": {"tz": "UTC"}}',
    ' \n```json\n{"name": "get_time", "arguments": {"tz": "UTC"}}\n```',
    '<tool_call>\n{"name": "get_time", "arguments": "{\\"tz\\": \\"UTC\\"}"}\n</tool_call>',
    '<think>Which tool?</think>{"name": "get_time", "arguments": {"tz": "UTC"}}',
])
def test_a_call_is_read_in_the_shapes_small_models_write(text):
    calls = parse_calls(text, USE)
    assert calls is not None and [(c.name, json.loads(c.arguments)) for c in calls] == [("get_time", {"tz": "UTC"})]


@pytest.mark.parametrize("text", [
    "It is noon.",
    '{"name": "get_date", "arguments": {}}',  # no such tool
    '{"name": "get_time", "arguments": {"tz": "UTC"}',  # cut short
    '{"name": "get_time", "arguments": [1]}',
    'Sure: {"name": "get_time", "arguments": {}}',  # prose around it: text
])
def test_anything_else_is_text(text):
    assert parse_calls(text, USE) is None


def test_several_calls_only_when_parallel():
    text = '[{"name": "get_time", "arguments": {}}, {"name": "add", "arguments": {"a": 1}}]'
    assert [c.name for c in parse_calls(text, USE)] == ["get_time", "add"]
    assert parse_calls(text, ToolUse(USE.tools, parallel=False)) is None
    named = ToolUse(USE.tools, "named", "add")
    assert parse_calls('{"name": "get_time", "arguments": {}}', named) is None


def test_a_stream_holds_back_only_what_may_be_a_call():
    assert might_be_call("") and might_be_call("  {") and might_be_call("<tool") and might_be_call("```")
    assert not might_be_call(" The time")


def test_history_calls_and_results_become_text_turns():
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
    out = plain_messages([{"role": "user", "content": "1+1?"},
                          {"role": "assistant", "content": None, "tool_calls": [call]},
                          {"role": "tool", "tool_call_id": "c1", "content": "2"},
                          {"role": "tool", "tool_call_id": "c1", "content": "still 2"}])
    assert out[1] == {"role": "assistant", "content": '{"name": "add", "arguments": {"a": 1}}'}
    assert len(out) == 3 and out[2]["role"] == "user"  # both results in one turn
    assert "The result of add (call c1):\n2" in out[2]["content"] and "still 2" in out[2]["content"]


def test_a_call_with_arguments_that_are_no_object_is_refused():
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "[1]"}}
    with pytest.raises(ApiError) as caught:
        plain_messages([{"role": "assistant", "tool_calls": [call]}])
    assert caught.value.param == "messages[0].tool_calls[0].function.arguments"
