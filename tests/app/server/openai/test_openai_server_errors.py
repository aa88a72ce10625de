"""Bad input to the OpenAI-compatible server: every error is OpenAI's JSON error shape
with a message a person can act on (naming the field at fault), over raw HTTP so that
malformed requests reach the server as sent; none leaves a traceback in the log."""

from __future__ import annotations

import json
import logging

import pytest

from tests.support.served import exchange, request_bytes, serving

pytestmark = pytest.mark.model  # a server on a real engine

CHAT = "/v1/chat/completions"
BODY_LIMIT = 256 * 1024  # over the 200 KB of the deeply nested body


def chat(**fields) -> bytes:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2, **fields}
    return request_bytes("POST", CHAT, json.dumps(body).encode())


def raw_chat(body: bytes, **headers) -> bytes:
    return request_bytes("POST", CHAT, body, headers=headers or None)


def head_only(method: str, path: str, *lines: str) -> bytes:
    extra = "".join(f"{line}\r\n" for line in lines)
    return f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sekrit\r\n{extra}\r\n".encode()


def chunked(body: bytes) -> bytes:
    head = head_only("POST", CHAT, "Transfer-Encoding: chunked", "Content-Type: application/json",
                     "Connection: close")
    return head + f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"


DEEP = b'{"messages": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"

# id: (request bytes, status, the field named in param (None: none), a word of the message)
CASES = {
    "max_tokens 1e999": (raw_chat(b'{"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1e999}'),
                         400, "max_tokens", "integer"),
    "content part text a number": (chat(messages=[{"role": "user", "content": [{"type": "text", "text": 5}]}]),
                                   400, "messages[0].content[0].text", "string"),
    "non-UTF-8 body": (raw_chat(b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}'), 400, None, "UTF-8"),
    "Content-Length abc": (head_only("POST", CHAT, "Content-Length: abc") + b"{}", 400, None, "Content-Length"),
    "Content-Length -1": (head_only("POST", CHAT, "Content-Length: -1") + b"{}", 400, None, "Content-Length"),
    "seed abc": (chat(seed="abc"), 400, "seed", "integer"),
    "seed 1.5": (chat(seed=1.5), 400, "seed", "integer"),
    "temperature NaN": (raw_chat(b'{"messages": [{"role": "user", "content": "hi"}], "temperature": NaN}'),
                        400, None, "NaN"),
    "temperature Infinity": (raw_chat(b'{"messages": [{"role": "user", "content": "hi"}], "temperature": Infinity}'),
                             400, None, "Infinity"),
    "temperature a word": (chat(temperature="hot"), 400, "temperature", "number"),
    "temperature 3": (chat(temperature=3), 400, "temperature", "<= 2"),
    "unknown role": (chat(messages=[{"role": "wizard", "content": "hi"}]), 400, "messages[0].role", "wizard"),
    "unknown role streaming": (chat(messages=[{"role": "wizard", "content": "hi"}], stream=True),
                               400, "messages[0].role", "wizard"),
    "message not an object": (chat(messages=["hi"]), 400, "messages[0]", "object"),
    "image content part": (chat(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]),
                           400, "messages[0].content[0].image_url", "{url}"),
    "image from the web": (chat(messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}]}]),
        400, "messages[0].content[0].image_url.url", "fetches no remote images"),
    "audio content part": (chat(messages=[{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}]}]),
                           400, "messages[0].content[0].type", "text"),
    "messages missing": (request_bytes("POST", CHAT, b'{"model": "m"}'), 400, "messages", "required"),
    "messages empty": (chat(messages=[]), 400, "messages", "empty"),
    "messages not a list": (chat(messages="hi"), 400, "messages", "list"),
    "n 5": (chat(n=5), 400, "n", "between 1 and 4"),
    "n 0": (chat(n=0), 400, "n", "between 1 and 4"),
    "n true": (chat(n=True), 400, "n", "integer"),
    "top_p 0": (chat(top_p=0), 400, "top_p", "> 0"),
    "negative max_tokens": (chat(max_tokens=-1), 400, "max_tokens", "at least 1"),
    "max_completion_tokens a string": (chat(max_completion_tokens="10"), 400, "max_completion_tokens", "integer"),
    "stop list too long": (chat(stop=["a", "b", "c", "d", "e"]), 400, "stop", "at most 4"),
    "stop of a number": (chat(stop=[7]), 400, "stop[0]", "string"),
    "stream a word": (chat(stream="yes"), 400, "stream", "true or false"),
    "stream_options without stream": (chat(stream_options={"include_usage": True}), 400, "stream_options", "stream"),
    "top_logprobs without logprobs": (chat(top_logprobs=2), 400, "top_logprobs", "logprobs"),
    "response_format json_schema without its schema": (chat(response_format={"type": "json_schema"}), 400,
                                                       "response_format.json_schema", "schema"),
    "response_format of another type": (chat(response_format={"type": "yaml"}), 400, "response_format.type",
                                        "json_schema"),
    "top_logprobs 21": (chat(logprobs=True, top_logprobs=21), 400, "top_logprobs", "between 0 and 20"),
    "json_object with ignore_eos": (chat(response_format={"type": "json_object"}, ignore_eos=True), 400, None,
                                    "ignore_eos"),
    # issue 25: a lone surrogate (JSON's "\ud800", no character at all) was a 500 from the tokenizer
    "lone surrogate in a message": (chat(messages=[{"role": "user", "content": "hi \ud800"}]), 400,
                                    "messages[0].content", "not valid Unicode"),
    "lone surrogate in a system message": (
        chat(messages=[{"role": "system", "content": "be \udfff"}, {"role": "user", "content": "hi"}]), 400,
        "messages[0].content", "surrogate"),
    "lone surrogate in a text part": (
        chat(messages=[{"role": "user", "content": [{"type": "text", "text": "\ud83d"}]}]), 400,
        "messages[0].content[0].text", "not valid Unicode"),
    "lone surrogate in a completions prompt": (
        request_bytes("POST", "/v1/completions", json.dumps({"prompt": "hi \ud800", "max_tokens": 2}).encode()),
        400, "prompt", "not valid Unicode"),
    "lone surrogate in a streamed completions prompt": (
        request_bytes("POST", "/v1/completions", json.dumps({"prompt": "hi \ud800", "stream": True}).encode()),
        400, "prompt", "surrogate"),
    "body not JSON": (raw_chat(b"{not json"), 400, None, "not JSON"),
    "body a JSON list": (raw_chat(b"[1, 2]"), 400, None, "object"),
    "body empty": (raw_chat(b""), 400, None, "empty"),
    "body nested 100,000 deep": (raw_chat(DEEP), 400, None, "nested"),
    "completions without a prompt": (request_bytes("POST", "/v1/completions", b'{"model": "m"}'), 400, "prompt",
                                     "prompt"),
    "PUT": (request_bytes("PUT", CHAT, b"{}"), 405, None, "PUT"),
    "OPTIONS": (request_bytes("OPTIONS", CHAT), 405, None, "OPTIONS"),
    "POST to /v1/models": (request_bytes("POST", "/v1/models", b"{}"), 405, None, "POST"),
    "unknown path": (request_bytes("GET", "/v1/engines"), 404, None, "/v1/engines"),
    "70 KB header": (request_bytes("GET", "/v1/models", headers={"X-Big": "a" * 70_000}), 431, None, "limit"),
    # Refused on its Content-Length, before any of the body is sent (or read).
    "body over the limit": (head_only("POST", CHAT, f"Content-Length: {BODY_LIMIT + 1}"), 413, None, str(BODY_LIMIT)),
    # No length given: counted while read.
    "chunked body over the limit": (chunked(b"{" + b" " * BODY_LIMIT + b"}"), 413, None, str(BODY_LIMIT)),
}


@pytest.fixture(scope="module")
def server(shared_engine):
    with serving(shared_engine, max_body_bytes=BODY_LIMIT) as srv:
        yield srv


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_bad_input_is_an_openai_error(server, caplog, case):
    data, status, param, word = CASES[case]
    caplog.set_level(logging.DEBUG)
    got, headers, body = exchange(server, data, timeout=20)  # a hang would time out
    assert got == status
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert word.lower() in error["message"].lower() and error["param"] == param
    assert error["type"] == "invalid_request_error"
    assert not [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]


def test_head_is_refused_like_other_methods(server):
    status, headers, body = exchange(server, request_bytes("HEAD", "/v1/models"))
    assert status == 405 and headers["content-type"] == "application/json" and body == b""


def test_unknown_fields_are_ignored(server):
    status, _, body = exchange(server, chat(temperature=0, some_new_field={"x": 1}, logit_bias={}, user="u"))
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"]


def test_an_unexpected_failure_is_a_500_in_openai_shape_and_one_log_line(server, caplog, monkeypatch):
    def broken(chat):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(server.state.engine, "prepare", broken)
    caplog.set_level(logging.DEBUG)
    status, _, body = exchange(server, chat())
    assert status == 500 and json.loads(body)["error"]["type"] == "server_error"
    lines = [r for r in caplog.records if "ZeroDivisionError" in r.getMessage()]
    assert len(lines) == 1 and not [r for r in caplog.records if r.exc_info]
