"""Replies read back as tool calls, and tool history written as text, in the generic format
(app/tools/parsing.py, app/server/openai/tool_prompt.py), on literal model outputs; the stream of such a
reply (app/server/openai/tool_reply.py) from recorded deltas. No model."""

from __future__ import annotations

import asyncio
import json

import pytest

from app.server.calls.engine_bridge import ChoiceDelta
from app.server.calls.generation import _events
from app.server.calls.reply import Call, ChoiceTally
from app.server.http.errors import ApiError
from app.server.openai.tool_prompt import plain_messages
from app.tools import Tool, ToolUse, might_be_call, parse_calls

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


def test_an_empty_list_of_calls_is_a_plain_turn():
    out = plain_messages([{"role": "assistant", "content": "Hello.", "tool_calls": []}])
    assert out == [{"role": "assistant", "content": "Hello.", "tool_calls": []}]  # left for openai/parsing.py


def test_a_call_with_arguments_that_are_no_object_is_refused():
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": "[1]"}}
    with pytest.raises(ApiError) as caught:
        plain_messages([{"role": "assistant", "tool_calls": [call]}])
    assert caught.value.param == "messages[0].tool_calls[0].function.arguments"


# ----- the reply's events (tool_reply.py), fed recorded deltas ----------------------------------

def tool_stream(texts: list[str]) -> list[dict]:
    """The chunks of a streamed reply with tools offered (auto), from recorded deltas."""
    from app.server.openai.tool_reply import CHAT
    from app.server.openai.tool_request import tool_chat_generation
    from tests.app.server.openai.test_reasoning_content import Recorded, deltas

    tools = [{"type": "function", "function": {"name": "get_time"}}]
    gen = tool_chat_generation({"model": "m", "stream": True, "tools": tools,
                                "messages": [{"role": "user", "content": "Time?"}]}, None)
    call = Call("r1", "m", gen, [ChoiceTally()])
    items = [ChoiceDelta(0, d) for d in deltas(texts)]
    first = items.pop(0)
    call.tallies[0].add(first.delta)

    async def run() -> list[bytes]:
        return [event async for event in _events(CHAT, call, Recorded(items), first)]

    return [json.loads(e[len(b"data: "):]) for e in asyncio.run(run())[:-1]]


def test_a_streamed_call_after_reasoning_sends_both_in_their_places():
    chunks = tool_stream(["<think>", "The user wants", " the time.</think>", '{"name": "get_time", ',
                          '"arguments": {"tz": "UTC"}}'])
    deltas_ = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("reasoning_content", "") for d in deltas_) == "The user wants the time."
    assert not any(d.get("content") for d in deltas_)
    calls = [t for d in deltas_ for t in d.get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "get_time" and calls[0]["id"].startswith("call_")
    assert json.loads("".join(t["function"]["arguments"] for t in calls)) == {"tz": "UTC"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_prose_streams_as_it_comes_and_a_malformed_call_comes_out_as_text():
    prose = tool_stream(["  It", " is", " noon."])
    texts = [c["choices"][0]["delta"].get("content") for c in prose]
    assert texts[1:4] == ["  It", " is", " noon."]  # the held whitespace goes out with the first word
    assert prose[-1]["choices"][0]["finish_reason"] == "stop"
    broken = tool_stream(['{"name": "get_time", ', '"arguments": {'])
    assert [c["choices"][0]["delta"].get("content") for c in broken][1] == '{"name": "get_time", "arguments": {'
    assert broken[-1]["choices"][0]["finish_reason"] == "stop"
