"""The API key on every route but /health, compared in constant time: `Authorization: Bearer
KEY` (OpenAI's clients) or `x-api-key: KEY` (Anthropic's).

/health is open: it says only whether the model is loaded, which a probe or a load balancer
must learn without holding the key (as vLLM's and llama.cpp's servers do); /metrics, which
tells load and usage, keeps the key."""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from app.server.http.errors import error_bytes

OPEN_PATHS = frozenset({"/health"})


class ApiKeyMiddleware:
    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self.app = app
        self._key = api_key.encode() if api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._key is None or scope["path"] in OPEN_PATHS or self._authorized(scope):
            await self.app(scope, receive, send)
            return
        body = error_bytes(401, "missing or wrong API key: send 'Authorization: Bearer <key>' or 'x-api-key: <key>'",
                           path=scope["path"])
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b"Bearer")]})
        await send({"type": "http.response.body", "body": body})

    def _authorized(self, scope: Scope) -> bool:
        assert self._key is not None
        bearer, api_key = b"", None
        for name, value in scope["headers"]:
            if name == b"authorization":
                bearer = value
            elif name == b"x-api-key":
                api_key = value
        if api_key is not None:
            return hmac.compare_digest(api_key.strip(), self._key)
        scheme, _, token = bearer.partition(b" ")
        # compare_digest on every request, even a malformed header: timing says nothing.
        return hmac.compare_digest(token.strip(), self._key) and scheme.lower() == b"bearer"
