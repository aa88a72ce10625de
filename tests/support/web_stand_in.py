"""A stand-in web on loopback for the web tools' tests: a page, redirect chains, a redirect
to file://, a huge page, a slow page and a SearXNG-shaped JSON endpoint (/search)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

PAGE = b"<html><head><title>T</title></head><body><h1>Hello web</h1><p>A <b>bold</b> claim.</p></body></html>"


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 (the standard library's name)
        path = urlsplit(self.path).path
        if path == "/page":
            self._send(PAGE, "text/html; charset=utf-8")
        elif path.startswith("/hop/"):
            left = int(path.rsplit("/", 1)[1])
            self.send_response(302)
            self.send_header("Location", f"/hop/{left - 1}" if left > 1 else "/page")
            self.end_headers()
        elif path == "/to-file":
            self.send_response(302)
            self.send_header("Location", "file:///etc/passwd")
            self.end_headers()
        elif path == "/huge":
            self._send(b"<p>" + b"x" * 5_000_000 + b"</p>", "text/html")
        elif path == "/slow":
            time.sleep(3)
            self._send(PAGE, "text/html")
        elif path == "/search":
            query = parse_qs(urlsplit(self.path).query)
            assert query["format"] == ["json"]
            results = [{"title": f"Result {i} for {query['q'][0]}", "url": f"http://example.com/{i}",
                        "content": f"snippet {i}"} for i in range(10)]
            self._send(json.dumps({"results": results}).encode(), "application/json")
        else:
            self.send_error(404)

    def _send(self, body: bytes, content_type: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass


@contextmanager
def stand_in_web() -> Iterator[str]:
    """Its base URL, http://127.0.0.1:PORT, while it serves."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
