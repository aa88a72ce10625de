"""Chorus's OpenAI-compatible server on loopback, for the server's tests: start one over an
engine, talk to it with the official client or with raw HTTP."""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Iterator

from app.server.config import ServerConfig
from app.server.uvicorn_server import HttpServer

KEY = "sekrit"


@contextlib.contextmanager
def serving(engine, **config) -> Iterator[HttpServer]:
    settings = {"port": 0, "api_key": KEY, "model_id": "smollm2", **config}
    server = HttpServer(engine, ServerConfig(**settings)).start()
    try:
        yield server
    finally:
        server.stop()


def client(server, key: str = KEY, timeout: float = 180):
    import openai

    return openai.OpenAI(base_url=f"{server.url}/v1", api_key=key, max_retries=0, timeout=timeout)


def anthropic_client(server, key: str | None = KEY, x_api_key: str | None = None, timeout: float = 60):
    """The official `anthropic` client on the server's root (it adds /v1/messages itself).
    key: sent as this SDK sends api_key (Authorization: Bearer); x_api_key instead: only
    the `x-api-key` header, as Anthropic's own API takes it and curl examples send it."""
    import anthropic

    if x_api_key is None:
        return anthropic.Anthropic(base_url=server.url, api_key=key, max_retries=0, timeout=timeout)
    return anthropic.Anthropic(base_url=server.url, api_key="unused", max_retries=0, timeout=timeout,
                               default_headers={"Authorization": anthropic.omit, "x-api-key": x_api_key})


def ask(text: str, ignore_eos: bool = False, **kw) -> dict:
    """A greedy chat call's arguments; ignore_eos (an extension, as vLLM's): run to max_tokens."""
    extra = {"extra_body": {"ignore_eos": True}} if ignore_eos else {}
    return dict(model="smollm2", messages=[{"role": "user", "content": text}], temperature=0, **extra, **kw)


def request_bytes(method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                  key: str | None = KEY) -> bytes:
    head = {"Host": "127.0.0.1", "Connection": "close"}
    if key is not None:
        head["Authorization"] = f"Bearer {key}"
    if body is not None:
        head["Content-Type"] = "application/json"
        head["Content-Length"] = str(len(body))
    head.update(headers or {})
    lines = [f"{method} {path} HTTP/1.1"] + [f"{k}: {v}" for k, v in head.items() if v is not None]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + (body or b"")


def exchange(server, data: bytes, timeout: float = 30) -> tuple[int, dict[str, str], bytes]:
    """Send raw bytes, read until the server closes; returns status, headers, body."""
    with socket.create_connection((server.host, server.port), timeout=timeout) as sock:
        sock.sendall(data)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return status, headers, body


def post_json(server, path: str, payload: dict, **kw) -> tuple[int, dict[str, str], bytes]:
    return exchange(server, request_bytes("POST", path, json.dumps(payload).encode(), **kw))
