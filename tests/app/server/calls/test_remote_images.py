"""Images named by URL, fetched from the hosts the server was told to (calls/remote_images.py),
from a real HTTP server on loopback: each API's shape becomes the data the parsers take, and
every failure is a 400 naming the field."""

from __future__ import annotations

import base64
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.cli.serve import _host
from app.server.calls import remote_images
from app.server.calls.remote_images import fetch_remote_images
from app.server.http.errors import ApiError
from tests.inference.core.test_engine_images import RED, data_url
from tests.support.net import serving_on_a_thread


class _Images(BaseHTTPRequestHandler):
    other_port = 0  # the second server, for a redirect off the allowed host

    def do_GET(self):  # noqa: N802 - http.server's name
        routes = {
            "/red.png": (200, "image/png", RED),
            "/red.bin": (200, "application/octet-stream", RED),
            "/text": (200, "text/plain", b"hello"),
        }
        if self.path == "/away":
            self.send_response(302)
            self.send_header("Location", f"http://127.0.0.1:{self.other_port}/red.png")
            self.end_headers()
            return
        status, kind, body = routes.get(self.path, (404, "text/plain", b"no"))
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def hosts():
    with serving_on_a_thread(ThreadingHTTPServer(("127.0.0.1", 0), _Images)) as main, \
            serving_on_a_thread(ThreadingHTTPServer(("127.0.0.1", 0), _Images)) as other:
        _Images.other_port = other.server_address[1]
        yield f"http://127.0.0.1:{main.server_address[1]}", (f"127.0.0.1:{main.server_address[1]}",)


def chat(url: str) -> dict:
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": "What is it?"},
                                                      {"type": "image_url", "image_url": {"url": url}}]}]}


def test_each_api_s_image_url_becomes_the_image_s_bytes(hosts):
    base, allowed = hosts
    body = chat(f"{base}/red.png")
    fetch_remote_images(body, allowed)
    assert body == chat(data_url(RED))
    responses = {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": f"{base}/red.bin"}]}]}
    fetch_remote_images(responses, allowed)  # an octet-stream told apart by its first bytes
    assert responses["input"][0]["content"][0]["image_url"] == data_url(RED)
    anthropic = {"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": f"{base}/red.png"}}]}]}
    fetch_remote_images(anthropic, allowed)
    assert anthropic["messages"][0]["content"][0]["source"] == {
        "type": "base64", "media_type": "image/png", "data": base64.b64encode(RED).decode()}


def test_a_host_not_allowed_is_left_for_the_parser_to_refuse(hosts):
    base, _allowed = hosts
    body = chat(f"{base}/red.png")
    fetch_remote_images(body, ("example.com",))
    assert body == chat(f"{base}/red.png")


@pytest.mark.parametrize("path, words", [
    ("/missing.png", "could not be fetched: .* answered HTTP 404"),
    ("/text", "did not answer an image: .* sent text/plain"),
    ("/away", "could not be fetched: .* is not on a host allowed"),
])
def test_a_failed_fetch_is_a_400_naming_the_field(hosts, path, words):
    base, allowed = hosts
    with pytest.raises(ApiError, match=words) as caught:
        fetch_remote_images(chat(f"{base}{path}"), allowed)
    assert (caught.value.status, caught.value.param) == (400, "messages[0].content[1].image_url.url")


def test_an_image_over_the_engine_s_size_is_cut_off(hosts, monkeypatch):
    base, allowed = hosts
    monkeypatch.setattr(remote_images, "MAX_IMAGE_BYTES", len(RED) - 1)
    with pytest.raises(ApiError, match="larger than"):
        fetch_remote_images(chat(f"{base}/red.png"), allowed)


def test_an_anthropic_field_is_named_its_own_way(hosts):
    base, allowed = hosts
    image = {"type": "image", "source": {"type": "url", "url": f"{base}/x"}}
    body = {"messages": [{"role": "user", "content": [image]}]}
    with pytest.raises(ApiError) as caught:
        fetch_remote_images(body, allowed)
    assert caught.value.param == "messages.0.content.0.source"


def test_a_body_nested_past_python_s_recursion_limit_is_walked(hosts):
    base, allowed = hosts
    body = chat(f"{base}/red.png")
    deep: list = []
    body["extra"] = deep
    for _ in range(5000):
        deep.append([])
        deep = deep[0]
    fetch_remote_images(body, allowed)
    assert body["messages"] == chat(data_url(RED))["messages"]


@pytest.mark.parametrize("text, host", [("example.com", "example.com"), ("127.0.0.1:8000", "127.0.0.1:8000"),
                                        ("Images.Example.com", "images.example.com")])
def test_the_serve_option_takes_a_host_with_or_without_a_port(text, host):
    assert _host(text) == host


@pytest.mark.parametrize("text", ["https://example.com", "example.com:port", ":80"])
def test_the_serve_option_refuses_a_url_or_a_bad_port(text):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError):
        _host(text)
