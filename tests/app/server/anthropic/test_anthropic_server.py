"""Anthropic's Messages API (/v1/messages, /v1/messages/count_tokens; issue 25), driven by
the official `anthropic` client over loopback on the real model. The model is tiny: these
check the mechanics (shapes, stop reasons, counts, errors, limits), not the text.

This SDK sends no temperature of its own (newer models dropped it); the tests send 0 in
extra_body, as a client of an older model would, for greedy replies."""

from __future__ import annotations

import json

import pytest

from tests.support.engine_checks import assert_nothing_else_generates
from tests.support.served import KEY, anthropic_client, exchange, post_json, request_bytes, serving
from tests.support.waiting import wait_until

anthropic = pytest.importorskip("anthropic")
pytestmark = pytest.mark.model  # a server on a real engine

GREEDY = {"temperature": 0}
HELLO = [{"role": "user", "content": "Say hello."}]
STORY = [{"role": "user", "content": "Write a very long story about a lighthouse keeper and the sea."}]


@pytest.fixture(scope="module")
def server(shared_engine):
    with serving(shared_engine) as srv:
        yield srv


@pytest.fixture
def fresh(make_engine):
    """A server on a new reproducible engine, for tests that compare two greedy replies
    (the shared engine's cache layout, left by earlier tests, can move a greedy token)."""
    with serving(make_engine(n_ctx=1024, n_seq_max=2, reproducible=True)) as srv:
        yield srv


def create(client, messages=HELLO, max_tokens=16, **kw):
    return client.messages.create(model="smollm2", max_tokens=max_tokens, messages=messages,
                                  extra_body={**GREEDY, **kw.pop("extra_body", {})}, **kw)


def test_a_message_has_text_content_a_stop_reason_and_usage(server):
    msg = create(anthropic_client(server))
    assert msg.type == "message" and msg.role == "assistant" and msg.model == "smollm2"
    assert msg.id.startswith("msg_")
    assert [block.type for block in msg.content] == ["text"] and msg.content[0].text
    assert msg.stop_reason in ("end_turn", "max_tokens") and msg.stop_sequence is None
    assert msg.usage.input_tokens > 5 and 0 < msg.usage.output_tokens <= 16


def test_max_tokens_ends_the_message_with_stop_reason_max_tokens(server):
    msg = create(anthropic_client(server), STORY, max_tokens=3)
    assert msg.stop_reason == "max_tokens" and msg.usage.output_tokens == 3


def test_a_streamed_message_gives_its_text_and_the_final_message(fresh):
    c = anthropic_client(fresh)
    plain = create(c, STORY, max_tokens=12)
    with c.messages.stream(model="smollm2", max_tokens=12, messages=STORY, extra_body=GREEDY) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == plain.content[0].text and final.content[0].text == text
    assert final.stop_reason == plain.stop_reason == "max_tokens"
    assert final.usage.output_tokens == 12 and final.usage.input_tokens == plain.usage.input_tokens


def test_the_stream_is_anthropics_event_sequence_with_event_lines(server):
    body = {"model": "m", "max_tokens": 4, "stream": True, "messages": STORY, **GREEDY}
    status, headers, raw = post_json(server, "/v1/messages", body, headers={"x-api-key": KEY}, key=None)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    events = []
    for block in _dechunked(raw).decode().split("\n\n"):
        if block.strip():
            name_line, data_line = block.split("\n")
            name, data = name_line.removeprefix("event: "), json.loads(data_line.removeprefix("data: "))
            assert data["type"] == name  # every `event:` line names its data's type
            events.append(data)
    names = [e["type"] for e in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert set(names[3:-3]) == {"content_block_delta"} and len(names) > 6
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert events[0]["message"]["usage"]["input_tokens"] > 5 and events[0]["message"]["content"] == []
    assert all(e["delta"]["type"] == "text_delta" for e in events[3:-3])
    assert events[-2]["delta"] == {"stop_reason": "max_tokens", "stop_sequence": None}
    assert events[-2]["usage"]["output_tokens"] == 4


def _dechunked(raw: bytes) -> bytes:
    """A chunked body's data (the server streams with Transfer-Encoding: chunked)."""
    out, rest = b"", raw
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out, rest = out + rest[:size], rest[size + 2:]
    return out


def test_stop_sequences_end_the_message_with_the_one_that_matched(fresh):
    c = anthropic_client(fresh)
    whole = create(c, STORY, max_tokens=24).content[0].text
    words = whole.split()
    assert len(words) >= 6, whole
    stop = words[4]  # a word the greedy reply writes, after some text
    msg = create(c, STORY, max_tokens=24, stop_sequences=["never-written-zq", stop])
    assert msg.stop_reason == "stop_sequence" and msg.stop_sequence == stop
    assert msg.content[0].text == whole[:whole.index(stop)]  # the text before it, the stop itself left out
    with c.messages.stream(model="smollm2", max_tokens=24, messages=STORY, stop_sequences=[stop],
                           extra_body=GREEDY) as stream:
        final = stream.get_final_message()
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == stop


def test_system_as_text_blocks_is_the_system_prompt(server):
    c = anthropic_client(server)
    as_blocks = [{"type": "text", "text": "You are a pirate. "}, {"type": "text", "text": "Answer in one line."}]
    counted = c.messages.count_tokens(model="smollm2", messages=HELLO, system=as_blocks).input_tokens
    assert counted == c.messages.count_tokens(model="smollm2", messages=HELLO,
                                              system="You are a pirate. Answer in one line.").input_tokens
    assert counted != c.messages.count_tokens(model="smollm2", messages=HELLO).input_tokens
    assert create(c, system=as_blocks, max_tokens=4).usage.input_tokens == counted


def test_count_tokens_equals_the_usage_input_tokens(server):
    c = anthropic_client(server)
    turns = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": [{"type": "text", "text": "Hello!"}]},
             {"role": "user", "content": [{"type": "text", "text": "Name a colour."}]}]
    counted = c.messages.count_tokens(model="smollm2", messages=turns, system="Be brief.")
    msg = create(c, turns, max_tokens=4, system="Be brief.")
    assert counted.input_tokens == msg.usage.input_tokens > 10


def test_x_api_key_is_the_key_too(server):
    assert anthropic_client(server, x_api_key=KEY).messages.count_tokens(model="m", messages=HELLO).input_tokens > 0
    for wrong in (anthropic_client(server, x_api_key="wrong"), anthropic_client(server, key="wrong")):
        with pytest.raises(anthropic.AuthenticationError) as err:
            wrong.messages.count_tokens(model="m", messages=HELLO)
        assert err.value.body["type"] == "error" and err.value.body["error"]["type"] == "authentication_error"


def test_bad_requests_are_400_in_anthropics_error_shape(server):
    c = anthropic_client(server)
    with pytest.raises(anthropic.BadRequestError) as err:
        create(c, extra_body={"temperature": 1.5})  # Anthropic's range is 0..1
    assert err.value.body == {"type": "error", "error": {"type": "invalid_request_error",
                                                         "message": "temperature must be >= 0 and <= 1, got 1.5"}}
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    with pytest.raises(anthropic.BadRequestError, match="without a vision projector"):
        create(c, [{"role": "user", "content": [image]}])
    with pytest.raises(anthropic.BadRequestError, match="messages.0.content.0 must be a text block"):
        create(c, [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x"}, image]}])
    with pytest.raises(anthropic.BadRequestError, match="context holds"):
        create(c, [{"role": "user", "content": "word " * 5000}])
    status, _, body = post_json(server, "/v1/messages", {"model": "m", "messages": HELLO})  # no max_tokens
    assert status == 400 and json.loads(body)["error"] == {"type": "invalid_request_error",
                                                           "message": "max_tokens is required: the most tokens "
                                                                      "the reply may have"}


def test_refusals_outside_the_route_speak_anthropic_on_its_paths(server):
    for method, path, status, kind in (("GET", "/v1/messages", 405, "invalid_request_error"),
                                       ("POST", "/v1/messages/nothing", 404, "not_found_error")):
        got, _, body = exchange(server, request_bytes(method, path, b"{}" if method == "POST" else None))
        assert got == status and json.loads(body)["error"]["type"] == kind, body
    status, _, body = exchange(server, request_bytes("POST", "/v1/messages", b"x" * (17 << 20)))
    assert status == 413 and json.loads(body)["error"]["type"] == "request_too_large"
    # OpenAI's routes keep OpenAI's shape
    status, _, body = exchange(server, request_bytes("GET", "/v1/chat/completions"))
    assert status == 405 and json.loads(body)["error"]["code"] == "method_not_allowed"


def test_more_calls_than_allowed_get_a_429_the_sdk_reads(make_engine):
    engine = make_engine(n_ctx=1024, n_seq_max=1)
    with serving(engine, max_concurrent=1) as srv:
        c = anthropic_client(srv)
        with c.messages.stream(model="m", max_tokens=400, messages=STORY, extra_body={"ignore_eos": True}) as held:
            next(iter(held.text_stream))  # the one slot is taken
            with pytest.raises(anthropic.RateLimitError) as err:
                create(c, max_tokens=2)
        assert err.value.response.headers["retry-after"] == "1"
        assert err.value.body["error"]["type"] == "rate_limit_error"
        # the slot comes back once the server sees the stream's client gone
        wait_until(lambda: srv.state.generating == 0, "the held stream's slot given back", timeout=15)
        assert create(c, max_tokens=2).usage.output_tokens > 0


def test_a_client_leaving_mid_stream_frees_its_engine_request(make_engine):
    engine = make_engine(n_ctx=1024, n_seq_max=2)
    with serving(engine) as srv:
        with anthropic_client(srv).messages.stream(model="m", max_tokens=600, messages=STORY,
                                                   extra_body={"ignore_eos": True}) as stream:
            pieces = iter(stream.text_stream)
            next(pieces), next(pieces)
            assert engine.metrics(fresh=True).running == 1  # still writing when the client leaves
        wait_until(lambda: engine.metrics(fresh=True).running == 0, timeout=15)
        assert_nothing_else_generates(engine)


def test_a_disconnect_while_the_message_is_collected_cancels_it_too(make_engine):
    engine = make_engine(n_ctx=1024, n_seq_max=2)
    with serving(engine) as srv:
        c = anthropic_client(srv, timeout=1.5)  # the client gives up (and closes) mid-reply
        with pytest.raises(anthropic.APITimeoutError):
            create(c, STORY, max_tokens=2000, extra_body={"ignore_eos": True})
        wait_until(lambda: engine.metrics(fresh=True).running == 0, timeout=15)
        assert_nothing_else_generates(engine)
