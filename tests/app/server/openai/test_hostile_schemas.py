"""One small request must never take the server down (issue 38): the schemas that once
crashed `chorus serve` (a 150-byte `maxLength: 100000` overflowed llama.cpp's grammar parser's
stack), grew it to 23 GB (`minLength: 10**9`) or held the engine for two minutes (a
100,000-value enum), sent as a careless client would, on the real server and model. Each is
answered (a bounded reply) or refused with a 400 naming the keyword, and the server goes on."""

from __future__ import annotations

import json
import re

import psutil
import pytest

from tests.support.served import ask, client, exchange, request_bytes, serving

openai = pytest.importorskip("openai")
pytestmark = pytest.mark.model  # a server on a real engine

HUGE_BOUNDS = {
    "maxLength 100000": {"type": "string", "maxLength": 100_000},
    "maxItems 100000": {"type": "array", "items": {"type": "integer"}, "maxItems": 100_000},
    "pattern a{0,100000}": {"type": "string", "pattern": "^a{0,100000}$"},
    "minLength 10**9": {"type": "string", "minLength": 10**9},
    "minItems 10**7": {"type": "array", "items": {"type": "integer"}, "minItems": 10**7},
}
MEMORY_GROWTH_BYTES = 300 * 2**20  # the old converter's grammar for minLength 10**9 passed 20 GB


@pytest.fixture(scope="module")
def server(shared_engine):
    with serving(shared_engine) as srv:
        yield srv


def wrapped(schema: dict) -> dict:
    """A schema as an object's one required field: response_format wants an object."""
    return {"type": "object", "properties": {"value": schema}, "required": ["value"]}


def schema_format(schema: dict) -> dict:
    return {"type": "json_schema", "json_schema": {"name": "s", "schema": wrapped(schema), "strict": True}}


def still_serving(server) -> None:
    out = client(server).chat.completions.create(**ask("Say hi.", max_tokens=4))
    assert out.choices[0].message.content


@pytest.mark.parametrize("name", list(HUGE_BOUNDS))
def test_huge_bounds_in_response_format_get_a_bounded_answer(server, name):
    rss = psutil.Process().memory_info().rss
    out = client(server).chat.completions.create(**ask("Write the value.", max_tokens=24),
                                                 response_format=schema_format(HUGE_BOUNDS[name]))
    choice = out.choices[0]
    assert choice.finish_reason in ("stop", "length")
    assert re.match(r'\{\s*"value": ', choice.message.content)  # the grammar held from the first token
    assert psutil.Process().memory_info().rss - rss < MEMORY_GROWTH_BYTES
    still_serving(server)


def test_huge_bounds_on_completions_and_a_forced_call(server):
    c = client(server)
    out = c.completions.create(model="m", prompt="A value:", max_tokens=16, temperature=0,
                               extra_body={"response_format": schema_format(HUGE_BOUNDS["maxLength 100000"])})
    assert re.match(r'\{\s*"value": "', out.choices[0].text)
    tools = [{"type": "function", "function": {"name": "f", "parameters": wrapped(HUGE_BOUNDS["pattern a{0,100000}"])}}]
    out = c.chat.completions.create(**ask("Call f.", max_tokens=40), tools=tools, tool_choice="required")
    assert out.choices[0].finish_reason in ("tool_calls", "length")
    still_serving(server)


@pytest.mark.parametrize("values", [20_000, 100_000])
def test_a_huge_enum_is_a_400_naming_it_and_its_limit(server, values):
    schema = {"type": "object", "properties": {"code": {"enum": [f"code-{i}" for i in range(values)]}}}
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(**ask("Pick one.", max_tokens=4),
                                               response_format={"type": "json_schema",
                                                                "json_schema": {"name": "s", "schema": schema}})
    assert caught.value.param == "response_format.json_schema.schema.properties.code"
    assert "'enum'" in caught.value.message and "10,000" in caught.value.message
    still_serving(server)


def test_a_huge_enum_in_a_forced_calls_parameters_is_a_400(server):
    parameters = {"type": "object", "properties": {"code": {"enum": list(range(50_000))}}}
    tools = [{"type": "function", "function": {"name": "f", "parameters": parameters}}]
    with pytest.raises(openai.BadRequestError) as caught:
        client(server).chat.completions.create(**ask("Call f.", max_tokens=4), tools=tools, tool_choice="required")
    assert caught.value.param == "tools[0].function.parameters.properties.code"


def post(server, path: str, body: dict) -> tuple[int, dict]:
    status, _, raw = exchange(server, request_bytes("POST", path, json.dumps(body).encode()), timeout=30)
    return status, json.loads(raw)


def test_a_tool_name_with_a_newline_is_a_400(server):
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
            "tools": [{"type": "function", "function": {"name": "f\n"}}]}
    status, answer = post(server, "/v1/chat/completions", body)
    assert status == 400 and answer["error"]["param"] == "tools[0].function.name"


def test_a_lone_surrogate_in_an_enum_is_a_400(server):
    raw = (b'{"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, "response_format": '
           b'{"type": "json_schema", "json_schema": {"name": "s", "schema": {"enum": ["\\ud800"]}}}}')
    status, _, body = exchange(server, request_bytes("POST", "/v1/chat/completions", raw), timeout=30)
    assert status == 400 and json.loads(body)["error"]["param"].startswith("response_format.json_schema.schema")


def test_embeddings_of_token_lists_and_strings_mixed_are_a_400(server):
    status, answer = post(server, "/v1/embeddings", {"model": "m", "input": [[1, 2], "a"]})
    assert status == 400 and answer["error"]["param"] == "input"
