"""One line a person can act on for each way a remote OpenAI-compatible server can fail:
unreachable, slow, refusing the key, busy, broken, or gone mid-reply. Never the API key,
never a traceback."""

from __future__ import annotations

import email.utils
import json
import re
import socket
import time
from html import unescape

import httpx

DETAIL_CHARS = 200


class RemoteError(RuntimeError):
    """A remote request or check failed; the message is meant for the person."""


def explain(exc: BaseException, base_url: str, timeouts: httpx.Timeout, replying: bool = False) -> str:
    """An httpx (or socket) failure as a sentence; replying: the reply had begun to stream."""
    cause = _root(exc)
    if isinstance(exc, httpx.ConnectTimeout):
        return f"{base_url} did not accept a connection within {timeouts.connect:.0f} s"
    if isinstance(exc, httpx.ReadTimeout) or isinstance(cause, (socket.timeout, TimeoutError)):
        if replying:
            return f"{base_url} went silent for {timeouts.read:.0f} s in the middle of the reply"
        return f"{base_url} did not answer within {timeouts.read:.0f} s"
    if isinstance(exc, httpx.PoolTimeout):
        return f"too many requests to {base_url} at once: none could start within {timeouts.pool:.0f} s"
    if isinstance(cause, ConnectionRefusedError):
        return f"{base_url} refused the connection: is the server running?"
    if isinstance(cause, socket.gaierror):
        return f"cannot find the host of {base_url} (check the address and your network)"
    if isinstance(exc, httpx.ProxyError):
        return f"the proxy refused to reach {base_url}: {_one_line(str(exc))} (see HTTP_PROXY / NO_PROXY)"
    if isinstance(exc, (httpx.RemoteProtocolError, httpx.ReadError)) and replying:
        return f"{base_url} closed the connection in the middle of the reply (did the server stop?)"
    if isinstance(exc, httpx.ConnectError) and "CERTIFICATE" in str(exc).upper():
        return f"{base_url}: the server's TLS certificate is not trusted ({_one_line(str(cause))})"
    return f"cannot reach {base_url}: {_one_line(str(cause) or type(cause).__name__)}"


def http_error(status: int, headers: httpx.Headers, body: bytes, url: str) -> str:
    """A non-2xx answer as a sentence, with the server's own reason where it gave one."""
    detail = _detail(body, headers.get("content-type", ""))
    said = f": {detail}" if detail else ""
    if status in (401, 403):
        return f"the server refused the API key ({status}){said}"
    if status == 404:
        if detail and "model" in detail.lower():
            return f"the server answered 404{said}"
        return f"no such endpoint ({url}); is the base URL right (…/v1)?"
    if status == 429:
        wait = retry_after_s(headers.get("retry-after"))
        when = f"; try again in {wait} s" if wait is not None else "; try again later"
        return f"the server is busy (429){said}{when}"
    if status >= 500:
        return f"the server failed ({status}){said}"
    return f"the server answered {status}{said}"


def retry_after_s(value: str | None) -> int | None:
    """Retry-After in whole seconds: either delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return int(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0, round(when.timestamp() - time.time()))


def event_error(payload: dict) -> str:
    """An error the server sent inside the stream."""
    return _message(payload) or "the server reported an error mid-reply"


def _detail(body: bytes, content_type: str) -> str:
    text = body.decode("utf-8", "replace")
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    if isinstance(payload, dict):
        return _one_line(_message(payload))
    if "html" in content_type.lower() or text.lstrip().startswith("<"):
        return _one_line(_html_text(text))
    return _one_line(text)


def _message(payload: dict) -> str:
    """The reason in the shapes servers use: OpenAI's {"error": {"message"}}, {"error": "…"},
    FastAPI's {"detail": …}, or a bare {"message"}."""
    error = payload.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    if isinstance(error, str) and error:
        return error
    for key in ("detail", "message"):
        if payload.get(key):
            return str(payload[key])
    return ""


def _html_text(html: str) -> str:
    """An HTML error page's title, or its text (a proxy's or a framework's default page)."""
    title = re.search(r"<title[^>]*>(.*?)</title>", html, re.IGNORECASE | re.DOTALL)
    if title and title.group(1).strip():
        return unescape(title.group(1))
    body = re.sub(r"<(script|style)[^>]*>.*?</\1>", " ", html, flags=re.IGNORECASE | re.DOTALL)
    return unescape(re.sub(r"<[^>]+>", " ", body))


def _one_line(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def _root(exc: BaseException) -> BaseException:
    """The original OSError under httpx's and httpcore's wrappers."""
    seen = exc
    for _ in range(10):  # chains are short; never follow a cycle
        below = seen.__cause__ or seen.__context__
        if below is None:
            break
        seen = below
    return seen
