"""The request line and headers under a size limit, whole.

h11 bounds only an *incomplete* request head (h11_max_incomplete_event_size): a 70 KB head
that arrives in one read is parsed whole. This refuses it (431) before any route runs."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.http.errors import error_bytes


class HeaderLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self._size(scope) > self.max_bytes:
            body = error_bytes(431, f"the request line and headers are over this server's limit of "
                                    f"{self.max_bytes} bytes", path=scope.get("path", ""))
            await send({"type": "http.response.start", "status": 431,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _size(scope: Scope) -> int:
        line = len(scope.get("raw_path", b"")) + len(scope.get("query_string", b"")) + 16
        return line + sum(len(name) + len(value) + 4 for name, value in scope["headers"])
