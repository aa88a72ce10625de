"""Every error the server answers, in OpenAI's shape:
{"error": {"message", "type", "param", "code"}}, or on Anthropic's routes (/v1/messages...)
in Anthropic's: {"type": "error", "error": {"type", "message"}}; never an HTML page, never
a traceback. The shape goes by the request's path, so the middleware's refusals (401, 431)
and Starlette's (404, 405) speak each client's dialect too.

ApiError is raised anywhere below a route; the handlers here turn it (and Starlette's own
404/405, and anything unexpected) into that JSON. An unexpected failure is logged as one
line, so the log says what happened without a stack a user cannot act on."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

log = logging.getLogger(__name__)

# The type and code OpenAI's clients map to their exception classes (by status).
_KINDS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_value"),
    401: ("authentication_error", "invalid_api_key"),
    404: ("invalid_request_error", "not_found"),
    405: ("invalid_request_error", "method_not_allowed"),
    408: ("invalid_request_error", "request_timeout"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    431: ("invalid_request_error", "headers_too_large"),
    500: ("server_error", "internal_error"),
    503: ("server_error", "service_unavailable"),
}


# Anthropic's error types by status (its SDK maps the status to its exception classes; the
# type is what its users read). 503: the engine is loading or down, "overloaded" to Anthropic.
_ANTHROPIC_KINDS: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    529: "overloaded_error",
}
ANTHROPIC_PREFIX = "/v1/messages"


def speaks_anthropic(path: str) -> bool:
    return path == ANTHROPIC_PREFIX or path.startswith(ANTHROPIC_PREFIX + "/")


class ApiError(Exception):
    """A request the server refuses: its status, and a message a person can act on.
    param names the request field at fault, when there is one; code, OpenAI's code where
    the status alone does not say it (model_not_found)."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 headers: Mapping[str, str] | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.headers = dict(headers or {})
        self.code = code

    def payload(self, path: str = "") -> dict:
        return error_payload(self.status, self.message, self.param, path, self.code)


def error_payload(status: int, message: str, param: str | None = None, path: str = "",
                  code: str | None = None) -> dict:
    """The error in the shape of the API that path belongs to."""
    if speaks_anthropic(path):
        kind = _ANTHROPIC_KINDS.get(status, "invalid_request_error" if status < 500 else "api_error")
        return {"type": "error", "error": {"type": kind, "message": message}}
    kind, usual = _KINDS.get(status, ("invalid_request_error" if status < 500 else "server_error", str(status)))
    return {"error": {"message": message, "type": kind, "param": param, "code": code or usual}}


def error_bytes(status: int, message: str, param: str | None = None, path: str = "") -> bytes:
    return json.dumps(error_payload(status, message, param, path)).encode()


def error_response(status: int, message: str, param: str | None = None,
                   headers: Mapping[str, str] | None = None, path: str = "", code: str | None = None) -> Response:
    return JSONResponse(error_payload(status, message, param, path, code), status_code=status,
                        headers=dict(headers or {}))


async def api_error_handler(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status, exc.message, exc.param, exc.headers, request.url.path, exc.code)


async def http_error_handler(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals: no route (404), a method the route lacks (405)."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        message = f"no route for {request.method} {request.url.path}"
    elif exc.status_code == 405:
        allowed = (exc.headers or {}).get("Allow", "")
        message = f"{request.method} is not allowed on {request.url.path}" + (f" (use {allowed})" if allowed else "")
    else:
        message = str(exc.detail)
    return error_response(exc.status_code, message, headers=exc.headers, path=request.url.path)


async def unexpected_error_handler(request: Request, exc: Exception) -> Response:
    """A bug: one line in the log (what and where), a 500 in OpenAI's shape to the client."""
    log.error("internal error on %s %s: %s: %s", request.method, request.url.path, type(exc).__name__, exc)
    return error_response(500, "internal server error; the server's log says more", path=request.url.path)


EXCEPTION_HANDLERS = {
    ApiError: api_error_handler,
    HTTPException: http_error_handler,
    Exception: unexpected_error_handler,
}


class QuietErrors:
    """Outermost: Starlette answers an unexpected error (unexpected_error_handler logs it as one line) and
    then re-raises it for the server to see; uvicorn would log its traceback. Swallowed
    here, after the answer went out; a response cut mid-body is closed by uvicorn."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:  # noqa: BLE001 - already answered and logged (unexpected_error_handler)
            if not started:
                log.error("unanswered internal error: %s: %s", type(exc).__name__, exc)
        except asyncio.CancelledError:
            # uvicorn cancels what is still running a few seconds into a stop (a body
            # still arriving, say), logs a traceback for each and answers in plain text:
            # one line and OpenAI's JSON instead.
            log.info("%s %s cut short: the server stopped", scope.get("method"), scope.get("path"))
            if not started:
                body = error_bytes(503, "the server stopped before this request was answered",
                                   path=scope.get("path", ""))
                await send({"type": "http.response.start", "status": 503,
                            "headers": [(b"content-type", b"application/json"),
                                        (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
                await send({"type": "http.response.body", "body": body})
