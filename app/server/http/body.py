"""A request's body: read under a size limit and a deadline, then decoded as strict JSON.

The limit is checked against Content-Length first and then counted while reading, so a
client lying about its length (or sending chunked) cannot make the server buffer more; the
deadline refuses a body sent slowly (408) instead of holding the request open. Only then is
anything parsed. A body over the limit is read to its end and dropped (up to DRAIN_BYTES
more), so that the client reads its 413."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator

import anyio
from starlette.requests import ClientDisconnect, Request

from app.server.http.errors import ApiError


class ClientGone(Exception):
    """The client disconnected before its body was read: nobody to answer."""


# An oversized body is still read (and dropped) up to this much past the limit before the
# 413: a socket closed with input unread is reset by the kernel, and a client still sending
# (Python's http.client, most SDKs) then sees ECONNRESET instead of the answer. Past it the
# connection is closed anyway: draining a body without end would be the attack itself.
DRAIN_BYTES = 64 * 1024 * 1024
# A client that pauses this long is waiting for the answer (it declared a length it does not
# send): it gets the 413 then.
DRAIN_IDLE_S = 1.0


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    stream = request.stream()
    over = _declared_over(request, limit)
    chunks: list[bytes] = []
    try:
        with anyio.fail_after(timeout_s):
            over = over or await _read_within(stream, limit, chunks)
            if over:
                await _drop_rest(stream)
    except TimeoutError:
        if over:  # what counts is the size; the connection closes either way
            raise _too_large(limit) from None
        raise ApiError(408, f"the request body did not arrive within {timeout_s:g} s",
                       headers={"Connection": "close"}) from None
    except ClientDisconnect:
        raise ClientGone() from None
    if over:
        raise _too_large(limit)
    return b"".join(chunks)


def _declared_over(request: Request, limit: int) -> bool:
    """Content-Length over the limit. Far over it, or with `Expect: 100-continue` (the body
    is not sent before an answer), it is refused before reading anything."""
    declared = request.headers.get("content-length")
    # h11 has already refused a Content-Length that is not digits (a 400 before any route).
    if declared is None or not declared.isdigit() or int(declared) <= limit:
        return False
    waits = request.headers.get("expect", "").lower() == "100-continue"
    if waits or int(declared) > limit + DRAIN_BYTES:
        raise _too_large(limit)
    return True


async def _read_within(stream: AsyncIterator[bytes], limit: int, chunks: list[bytes]) -> bool:
    """The body into chunks; True (and stops) once it passes the limit."""
    size = 0
    async for chunk in stream:
        size += len(chunk)
        if size > limit:
            return True
        chunks.append(chunk)
    return False


async def _drop_rest(stream: AsyncIterator[bytes]) -> None:
    """Reads and drops the rest of an oversized body, until it ends, DRAIN_BYTES more came,
    or the client paused for DRAIN_IDLE_S."""
    dropped = 0
    while dropped <= DRAIN_BYTES:
        chunk = b""
        with anyio.move_on_after(DRAIN_IDLE_S):
            chunk = await anext(stream, b"")
        if not chunk:  # the body's end (Starlette's stream ends with b""), or a pause
            return
        dropped += len(chunk)


def _too_large(limit: int) -> ApiError:
    # Closing the connection: a client is not asked to send its next request after this.
    return ApiError(413, f"the request body is over this server's limit of {limit} bytes",
                    headers={"Connection": "close"})


def _refuse_constant(name: str) -> float:
    # Python's json reads NaN and Infinity, which JSON does not allow; no field takes them.
    raise ValueError(f"{name} is not a JSON value")


def parse_json_object(raw: bytes) -> dict:
    if not raw.strip():
        raise ApiError(400, "the request body is empty; send a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the request body is not UTF-8 text (byte {exc.start})") from None
    try:
        body = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        raise ApiError(400, f"the request body is not JSON: {exc.msg} at {where}") from None
    except ValueError as exc:
        raise ApiError(400, f"the request body is not JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "the request body is nested too deeply") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return body


def is_finite_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
