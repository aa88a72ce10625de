"""/v1/chat/completions with tools for a model whose template has its own tool format: the
tools and the history's calls go to the template (ChatRequest.tools, OpenAI's shape with
arguments as dicts), a forced call uses the format's grammar and the reply is read in that
format. On the real Qwen 2.5 template (tests/fixtures/chat_templates); no model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from app.server.calls.engine_bridge import ChoiceDelta
from app.server.calls.generation import _events
from app.server.calls.reply import Call, ChoiceTally
from app.server.http.errors import ApiError
from app.server.openai.tool_reply import CHAT
from app.server.openai.tool_request import tool_chat_generation
from inference.tokenizer.chat_template import ChatTemplate

QWEN = (Path(__file__).parents[3] / "fixtures" / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja").read_text()
TOOL = {"type": "function", "function": {"name": "get_weather", "description": "The weather",
                                         "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
BODY = {"tools": [TOOL], "messages": [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": None, "tool_calls": [CALL]},
    {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "18 C"}]},
]}


def test_a_native_template_gets_the_tools_and_the_history_as_is():
    gen = tool_chat_generation(BODY, None, template=QWEN)
    assert gen.tool_format.name == "hermes" and gen.chat.tools == (TOOL,)
    assert gen.chat.messages[1]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    assert gen.chat.messages[2] == {"role": "tool", "tool_call_id": "call_1", "content": "18 C"}
    out = ChatTemplate(QWEN).render(list(gen.chat.messages), tools=list(gen.chat.tools))
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in out
    assert "<tool_response>\n18 C\n</tool_response>" in out and "# Tools" in out


def test_with_tool_choice_none_the_history_stays_in_the_models_format_and_no_tool_is_offered():
    """The calls the model made earlier are shown to it as it wrote them (not as the generic
    format's text, which it never wrote), no tool is offered, and the reply is read as text."""
    gen = tool_chat_generation({**BODY, "tool_choice": "none"}, None, template=QWEN)
    assert gen.tools is None and gen.chat.tools is None and gen.chat.sampling.grammar is None
    assert gen.chat.messages[1]["tool_calls"][0]["function"]["arguments"] == {"city": "Paris"}
    out = ChatTemplate(QWEN).render(list(gen.chat.messages))
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in out
    assert "<tool_response>\n18 C\n</tool_response>" in out
    assert "# Tools" not in out and "You can call these functions" not in out
    no_tools = {k: v for k, v in BODY.items() if k != "tools"}  # the same history, tools left out
    assert tool_chat_generation(no_tools, None, template=QWEN).chat.messages == gen.chat.messages


def test_without_a_native_template_the_generic_format_stays():
    gen = tool_chat_generation(BODY, None, template=None)
    assert gen.tool_format.name == "generic" and gen.chat.tools is None
    assert "You can call these functions" in gen.chat.messages[0]["content"]


def test_a_forced_call_uses_the_formats_grammar():
    gen = tool_chat_generation({**BODY, "tool_choice": "required"}, None, template=QWEN)
    assert '"<tool_call>\\n" call_json' in gen.chat.sampling.grammar


def test_a_native_history_is_checked_as_the_generic_one():
    bad = {**BODY, "messages": [*BODY["messages"][:2], {"role": "tool", "tool_call_id": "nope", "content": "x"}]}
    with pytest.raises(ApiError) as caught:
        tool_chat_generation(bad, None, template=QWEN)
    assert caught.value.param == "messages[2].tool_call_id"


def test_a_streamed_reply_is_read_in_the_models_format():
    call, items = _answered(["<tool_call>", '\n{"name": "get_weather", ', '"arguments": {"city": "Lyon"}}\n',
                             "</tool_call>"], stream=True)
    chunks = _streamed(call, items)
    sent = [c["choices"][0]["delta"] for c in chunks]
    assert not any(d.get("content") for d in sent)
    calls = [t for d in sent for t in d.get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "get_weather"
    assert json.loads("".join(t["function"]["arguments"] for t in calls)) == {"city": "Lyon"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


PROSE = "Let me check the weather."
PROSE_CALL = f'{PROSE}\n<tool_call>\n{{"name": "get_weather", "arguments": {{"city": "Lyon"}}}}\n</tool_call>'


def _answered(texts: list[str], stream: bool) -> tuple[Call, list[ChoiceDelta]]:
    from tests.app.server.openai.test_reasoning_content import deltas

    gen = tool_chat_generation({**BODY, "stream": stream}, None, template=QWEN)
    return Call("r1", "m", gen, [ChoiceTally()]), [ChoiceDelta(0, d) for d in deltas(texts)]


def _streamed(call: Call, items: list[ChoiceDelta]) -> list[dict]:
    """The stream's chunks (the final [DONE] left out) for the deltas, as the route sends them."""
    from tests.app.server.openai.test_reasoning_content import Recorded

    first = items.pop(0)
    call.tallies[0].add(first.delta)

    async def run() -> list[bytes]:
        return [event async for event in _events(CHAT, call, Recorded(items), first)]

    return [json.loads(e[len(b"data: "):]) for e in asyncio.run(run())[:-1]]


def test_prose_before_a_call_is_the_content_beside_the_tool_calls():
    """Issue 38: a Qwen reply that says what it does, then calls: content and tool_calls
    together (OpenAI allows both), streamed too: the prose as content deltas as it comes,
    no piece of the tag ever, then the call."""
    call, items = _answered([PROSE_CALL], stream=False)
    for item in items:
        call.tallies[0].add(item.delta)
    [choice] = CHAT.answer(call)["choices"]
    assert choice["message"]["content"] == PROSE and choice["finish_reason"] == "tool_calls"
    assert json.loads(choice["message"]["tool_calls"][0]["function"]["arguments"]) == {"city": "Lyon"}

    call, items = _answered(list(PROSE_CALL), stream=True)  # a character a delta
    chunks = _streamed(call, items)
    sent = [c["choices"][0]["delta"] for c in chunks]
    contents = [d["content"] for d in sent if d.get("content")]
    assert "".join(contents) == PROSE + "\n" and not any("<" in c for c in contents)
    calls = [t for d in sent for t in d.get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "get_weather" and chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert sent.index(next(d for d in sent if d.get("tool_calls"))) > max(i for i, d in enumerate(sent)
                                                                          if d.get("content"))
