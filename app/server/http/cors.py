"""CORS for the origins `chorus serve --cors-origin` allows (none by default: no middleware,
and a browser's preflight gets what any request gets: 401 without the key, 405 with it).

Starlette's CORSMiddleware answers preflights for allowed origins and adds the headers to
every answer to them (401s and 429s included, so a page can read why). Any request header
is allowed (the SDKs send their own: x-api-key, anthropic-version, x-stainless-*), no
credentials (the key travels in a header, never in a cookie). Its refusal of a preflight
(an origin or method not allowed) is a 400 in the path's JSON error shape instead of its
plain text."""

from __future__ import annotations

from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from app.server.http.errors import error_response

ALLOWED_METHODS = ("GET", "POST")
EXPOSED_HEADERS = ("Retry-After",)  # a page's client backs off on 429 as the SDKs do


def cors_middleware(origins: tuple[str, ...]) -> list[Middleware]:
    if not origins:
        return []
    return [Middleware(JsonCorsMiddleware, allow_origins=origins, allow_methods=ALLOWED_METHODS,
                       allow_headers=("*",), expose_headers=EXPOSED_HEADERS)]


class JsonCorsMiddleware(CORSMiddleware):
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = Headers(scope=scope)
        preflight = (scope["type"] == "http" and scope["method"] == "OPTIONS" and "origin" in headers
                     and "access-control-request-method" in headers)
        if not preflight:
            await super().__call__(scope, receive, send)
            return
        response = self.preflight_response(request_headers=headers)
        if response.status_code != 200:
            response = _as_json_error(response, scope["path"])
        await response(scope, receive, send)


def _as_json_error(refusal: Response, path: str) -> Response:
    what = bytes(refusal.body).decode().removeprefix("Disallowed CORS ")  # "origin", "origin, method"...
    kept = {k: v for k, v in refusal.headers.items() if k.lower() not in ("content-type", "content-length")}
    message = f"CORS preflight refused: this server does not allow the request's {what}"
    return error_response(refusal.status_code, message, headers=kept, path=path)
