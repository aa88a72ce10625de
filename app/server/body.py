"""A request's body: read under a size limit and a deadline, then decoded as strict JSON.

The limit is checked against Content-Length first and then counted while reading, so a
client lying about its length (or sending chunked) cannot make the server buffer more; the
deadline refuses a body sent slowly (408) instead of holding the request open. Only then is
anything parsed."""

from __future__ import annotations

import json
import math

import anyio
from starlette.requests import ClientDisconnect, Request

from app.server.errors import ApiError


class ClientGone(Exception):
    """The client disconnected before its body was read: nobody to answer."""


async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    declared = request.headers.get("content-length")
    # h11 has already refused a Content-Length that is not digits (a 400 before any route).
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise _too_large(limit)
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(408, f"the request body did not arrive within {timeout_s:g} s",
                       headers={"Connection": "close"}) from None
    except ClientDisconnect:
        raise ClientGone() from None
    return b"".join(chunks)


def _too_large(limit: int) -> ApiError:
    # Closing the connection: the rest of an oversized body is not worth reading.
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
