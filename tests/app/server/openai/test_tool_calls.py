"""Tools on /v1/chat/completions (issue 24) with the official `openai` client over loopback
on the real model: forced calls (tool_choice required, or a named function) end with
finish_reason tool_calls and arguments that parse and validate against the tool's schema,
streamed (OpenAI's delta.tool_calls shape) and not; a history with a call and its result is
answered; bad tool fields are 400s naming the field."""

from __future__ import annotations

import json

import pytest

from tests.support.served import ask, client, serving

openai = pytest.importorskip("openai")
jsonschema = pytest.importorskip("jsonschema")
pytestmark = pytest.mark.model  # a server on a real engine

WEATHER = {"type": "object", "required": ["city", "unit"],
           "properties": {"city": {"type": "string", "maxLength": 30},
                          "unit": {"enum": ["celsius", "fahrenheit"]}}}
TIME = {"type": "object", "required": ["timezone"], "properties": {"timezone": {"type": "string", "maxLength": 30}}}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city now",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "get_time", "description": "The time in a timezone",
                                           "parameters": TIME}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
NAMED_TIME = {"type": "function", "function": {"name": "get_time"}}


@pytest.fixture(scope="module")
def server(shared_engine):
    with serving(shared_engine) as srv:
        yield srv


def assert_valid_calls(calls) -> None:
    assert calls
    for call in calls:
        assert call.type == "function" and call.id.startswith("call_")
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


@pytest.mark.parametrize("parallel", [True, False])
def test_a_required_call_validates(server, parallel):
    out = client(server).chat.completions.create(**ask("What is the weather in Paris?", max_tokens=200),
                                                 tools=TOOLS, tool_choice="required", parallel_tool_calls=parallel)
    choice = out.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert_valid_calls(choice.message.tool_calls)
    if not parallel:
        assert len(choice.message.tool_calls) == 1


def test_a_named_call_is_that_function(server):
    out = client(server).chat.completions.create(**ask("What is the weather in Paris?", max_tokens=200),
                                                 tools=TOOLS, tool_choice=NAMED_TIME)
    calls = out.choices[0].message.tool_calls
    assert out.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in calls] == ["get_time"]
    assert_valid_calls(calls)


def test_a_streamed_call_comes_in_openais_shape(server):
    """Per call: first a delta with its index, id, type and name, then argument fragments."""
    heads, arguments, finishes = {}, {}, []
    for chunk in client(server).chat.completions.create(**ask("Weather in Rome?", max_tokens=200), stream=True,
                                                        tools=TOOLS, tool_choice={"type": "function",
                                                                                  "function": {"name": "get_weather"}}):
        choice = chunk.choices[0]
        finishes.append(choice.finish_reason)
        for piece in choice.delta.tool_calls or []:
            if piece.index not in heads:
                assert piece.id and piece.function.name and piece.type == "function"
                heads[piece.index] = piece
                arguments[piece.index] = ""
            else:
                assert piece.id is None and piece.function.name is None
            arguments[piece.index] += piece.function.arguments or ""
    assert finishes[-1] == "tool_calls" and set(finishes[:-1]) == {None}
    assert [h.function.name for h in heads.values()] == ["get_weather"]
    jsonschema.validate(json.loads(arguments[0]), WEATHER)
    assert len([f for f in finishes if f is None]) > 2  # the arguments came in fragments after the head


def test_a_history_with_a_tool_result_is_answered(server):
    c = client(server)
    asked = [{"role": "user", "content": "What is the weather in Paris?"},
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "call_1", "type": "function",
                  "function": {"name": "get_weather", "arguments": '{"city": "Paris", "unit": "celsius"}'}}]}]
    result = {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees and sunny, a light westerly breeze"}
    without = c.chat.completions.create(model="m", messages=asked + [{"role": "user", "content": "And so?"}],
                                        tools=TOOLS, tool_choice="none", max_tokens=40, temperature=0)
    out = c.chat.completions.create(model="m", messages=asked + [result], tools=TOOLS, tool_choice="none",
                                    max_tokens=40, temperature=0)
    assert out.choices[0].message.content and out.choices[0].message.tool_calls is None
    assert out.choices[0].finish_reason in ("stop", "length")
    assert out.usage.prompt_tokens > without.usage.prompt_tokens  # the result's text reached the prompt


def test_auto_answers_in_text_or_with_a_valid_call(server):
    out = client(server, timeout=180).chat.completions.create(**ask("What is the weather in Oslo?", max_tokens=60),
                                                 tools=TOOLS, tool_choice="auto")
    choice = out.choices[0]
    if choice.message.tool_calls:
        assert choice.finish_reason == "tool_calls"
        assert {c.function.name for c in choice.message.tool_calls} <= set(SCHEMAS)
    else:
        assert choice.finish_reason in ("stop", "length") and choice.message.content


@pytest.mark.parametrize(("extra", "param"), [
    ({"tool_choice": {"type": "function", "function": {"name": "get_stock"}}}, "tool_choice"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0].function.name"),
    ({"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}]},
     "tools[0].function.parameters"),
])
def test_bad_tool_fields_are_400s_naming_the_field(server, extra, param):
    body = {"tools": TOOLS, **extra}
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(**ask("Hi", max_tokens=5), **body)
    assert caught.value.param == param
    if extra.get("tool_choice") and isinstance(extra["tool_choice"], dict):
        assert "get_stock" in caught.value.message


def test_a_forced_call_on_a_schema_it_cannot_enforce_is_a_400_naming_the_keyword(server):
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"n": {"not": {"type": "number"}}}}}}]
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(**ask("Hi", max_tokens=5), tools=tools, tool_choice="required")
    assert "'not'" in caught.value.message
    assert caught.value.param == "tools[0].function.parameters.properties.n"


def test_a_tool_result_without_its_call_is_a_400(server):
    messages = [{"role": "user", "content": "Hi"}, {"role": "tool", "tool_call_id": "call_9", "content": "x"}]
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(model="m", messages=messages, max_tokens=5)
    assert caught.value.param == "messages[1].tool_call_id"
