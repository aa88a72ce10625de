"""The API key on every route (/metrics and /health included), compared in constant time."""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.errors import error_bytes


class ApiKeyMiddleware:
    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self._key = api_key.encode() if api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._key is None or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        body = error_bytes(401, "missing or wrong API key: send 'Authorization: Bearer <key>'")
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})

    def _authorized(self, scope: Scope) -> bool:
        assert self._key is not None
        given = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                given = value
        scheme, _, token = given.partition(b" ")
        # compare_digest on every request, even a malformed header: timing says nothing.
        return hmac.compare_digest(token.strip(), self._key) and scheme.lower() == b"bearer"
