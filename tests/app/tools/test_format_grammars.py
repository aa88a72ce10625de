"""Each tool format's forced-call grammar run by llama.cpp on the real model: whatever the
model writes under it is read back by that format as calls whose arguments validate against
the tools' schemas (one call, and several where parallel calls are required). The model's
template does not matter here: the grammar alone decides what it may write."""

from __future__ import annotations

import json

import pytest

from app.tools import Tool, ToolUse
from app.tools.formats import GENERIC, NATIVE
from inference import ChatRequest, FinishReason, SamplingParams

jsonschema = pytest.importorskip("jsonschema")
pytestmark = pytest.mark.model

# Values bounded (maxLength), as a free string is a place a greedy small model may stutter
# until max_tokens, and a call cut short parses to nothing.
WEATHER = Tool("get_weather", "The weather in a city now",
               {"type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                                 "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city", "unit"]})
TIME = Tool("get_time", "The time in a timezone",
            {"type": "object", "properties": {"timezone": {"type": "string", "maxLength": 30}},
             "required": ["timezone"]})
FORMATS = [GENERIC, *NATIVE]


@pytest.mark.parametrize("tool_format", FORMATS, ids=[f.name for f in FORMATS])
@pytest.mark.parametrize("choice", ["required", "named"])
def test_the_forced_grammar_writes_a_call_the_format_reads_and_that_validates(shared_engine, tool_format, choice):
    use = ToolUse((WEATHER, TIME), choice, "get_time" if choice == "named" else None, parallel=False)
    text = _written(shared_engine, tool_format.grammar(use), "What is the weather in Paris, and the time in Tokyo?")
    calls = tool_format.parse(text, use)
    assert calls, f"{tool_format.name} could not read what its grammar made: {text!r}"
    for call in calls:
        tool = next(t for t in use.callable if t.name == call.name)
        jsonschema.validate(json.loads(call.arguments), tool.parameters)
    if choice == "named":
        assert {c.name for c in calls} == {"get_time"}


@pytest.mark.parametrize("tool_format", FORMATS, ids=[f.name for f in FORMATS])
def test_parallel_required_calls_are_read_back_whole(shared_engine, tool_format):
    use = ToolUse((WEATHER, TIME), "required", None, parallel=True)
    text = _written(shared_engine, tool_format.grammar(use), "Call get_weather for Paris and get_time for Tokyo.")
    calls = tool_format.parse(text, use)
    assert calls and 1 <= len(calls) <= 4, f"{tool_format.name}: {text!r}"
    for call in calls:
        jsonschema.validate(json.loads(call.arguments), next(t for t in use.tools if t.name == call.name).parameters)


def _written(engine, grammar: str, question: str) -> str:
    sampling = SamplingParams(max_tokens=160, temperature=0.0, grammar=grammar)
    chat = ChatRequest(messages=({"role": "user", "content": question},), sampling=sampling)
    result = engine.submit(chat).result(120)
    assert result.error is None, result.error
    assert result.finish_reason is FinishReason.STOP, f"cut short: {result.text!r}"
    return result.text
