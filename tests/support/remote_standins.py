"""Stand-in servers on loopback for the remote client's failure cases, which a healthy
Chorus server never shows: refusals, error pages, streams cut or gone silent, a proxy.

Each stand-in runs a script, a function given the request handler, so a test says in a
few lines what the server does. Every request it saw is kept (line, headers, JSON body)."""

from __future__ import annotations

import json
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.support.net import serving_on_a_thread


@dataclass
class Seen:
    line: str
    headers: dict[str, str]
    body: dict | None


Script = Callable[["Handler"], None]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: StandinServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's names
        self._serve()

    def do_POST(self) -> None:  # noqa: N802
        self._serve()

    def _serve(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        body = json.loads(raw) if raw else None
        self.server.seen.append(Seen(self.requestline, dict(self.headers), body))
        try:
            self.server.script(self)
        except OSError:
            pass  # the client went away

    def log_message(self, *args: object) -> None:  # quiet
        pass

    # ----- what scripts say ------------------------------------------------------------

    @property
    def body(self) -> dict:
        return self.server.seen[-1].body or {}

    def answer(self, status: int, body: str | dict, content_type: str = "application/json",
               headers: dict[str, str] | None = None) -> None:
        data = (json.dumps(body) if isinstance(body, dict) else body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self, chunked: bool = True) -> None:
        """200 and SSE headers: chunked, as vLLM and llama.cpp send it, or (chunked=False)
        HTTP/1.0 style, the body ending only when the connection closes."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
        else:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self._chunked = chunked

    def send_event(self, payload: dict | str) -> None:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        self.send_raw(f"data: {data}\n\n".encode())

    def send_raw(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if self._chunked else data)
        self.wfile.flush()

    def end_stream(self) -> None:
        self.send_event("[DONE]")
        if self._chunked:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

    def die(self) -> None:
        """The server process dies: the connection drops, whatever was half sent."""
        self.connection.shutdown(socket.SHUT_RDWR)
        self.close_connection = True


def piece(text: str, finish: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": text} if text else {}, "finish_reason": finish}]}


def usage(prompt: int, completion: int) -> dict:
    return {"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                     "total_tokens": prompt + completion}}


def reply(words: list[str], end: str = "stop", send_usage: dict | None = None) -> Script:
    """A script streaming words, then the finish_reason, the usage if given, and [DONE]."""
    def script(h: Handler) -> None:
        h.start_stream()
        for word in words:
            h.send_event(piece(word))
        h.send_event(piece("", end))
        if send_usage is not None:
            h.send_event(send_usage)
        h.end_stream()
    return script


def trickle(h: Handler, every_s: float = 0.05, n: int = 1200) -> None:
    """One word every 50 ms for a minute."""
    h.start_stream()
    for _ in range(n):
        h.send_event(piece(" word"))
        time.sleep(every_s)


class StandinServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, script: Script, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.script = script
        self.seen: list[Seen] = []
        self.scheme = "http"
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
            self.scheme = "https"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server_port}/v1"


def self_signed(folder: Path) -> tuple[Path, ssl.SSLContext]:
    """A certificate for 127.0.0.1 (made by the openssl command) and a server context."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    return cert, context


@contextmanager
def standin(script: Script, tls: ssl.SSLContext | None = None) -> Iterator[StandinServer]:
    with serving_on_a_thread(StandinServer(script, tls)) as httpd:
        yield httpd


class _ProxyHandler(BaseHTTPRequestHandler):
    """A forward proxy that only records: every request it is asked to forward gets a short
    reply of its own (the proxy's), so a test sees the request went through the proxy."""

    protocol_version = "HTTP/1.1"
    server: RecordingProxy

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.lines.append(self.requestline)
        data = (f"data: {json.dumps(piece('via the proxy', 'stop'))}\n\ndata: [DONE]\n\n").encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


class RecordingProxy(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        self.lines: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_port}"


@contextmanager
def recording_proxy() -> Iterator[RecordingProxy]:
    with serving_on_a_thread(RecordingProxy()) as proxy:
        yield proxy


def openai_like(chat: Script, models: tuple[str, ...] = ("standin-7b",)) -> Script:
    """A stand-in that lists models at /models and answers chats with the chat script."""
    def script(h: Handler) -> None:
        if h.command == "GET" and h.path.endswith("/models"):
            h.answer(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in models]})
        else:
            chat(h)
    return script
