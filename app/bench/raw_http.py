"""One streaming chat completion over a plain socket, as a load-test client sees it.

Raw HTTP/1.1 on asyncio streams on purpose: a client library retries, reconnects and
folds resets into its own errors, which is exactly what a load test must not hide. Each
call opens one connection, sends one request, reads the answer (chunked, sized or until
close) and the SSE events in it up to `[DONE]`, and says how it ended: completed, a 429
(with its Retry-After), or a failure of one kind (reset, refused, timeout, 5xx, other).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from urllib.parse import urlsplit

# Failure kinds, as counted by the report.
RESET = "reset"  # the server dropped the connection (RST, or closed it before answering)
REFUSED = "refused"  # nothing accepted the connection
TIMEOUT = "timeout"  # no complete answer within the client's time limit
SERVER_ERROR = "5xx"
OTHER = "other"  # a 4xx other than 429, an error event, a stream cut before [DONE], garbage
FAILURE_KINDS = (RESET, REFUSED, TIMEOUT, SERVER_ERROR, OTHER)

MAX_ERROR_BODY = 64 * 1024  # enough of an error answer to quote its message


@dataclass(frozen=True)
class Target:
    """Where the server is, and the key it wants (if any)."""

    host: str
    port: int
    api_key: str | None = None

    @classmethod
    def from_url(cls, url: str, api_key: str | None = None) -> Target:
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.scheme != "http":
            raise ValueError(f"only plain http:// servers can be load-tested, not {parts.scheme}://")
        return cls(parts.hostname or "127.0.0.1", parts.port or 80, api_key)


@dataclass(frozen=True)
class ClientResult:
    status: int | None = None  # the HTTP status, None when no answer came
    failure: str | None = None  # one of FAILURE_KINDS, None for a completion or a clean 429
    detail: str = ""  # what went wrong, in a line
    retry_after: str | None = None  # a 429's Retry-After header
    ttft_s: float | None = None  # request start to the first generated text
    latency_s: float | None = None  # request start to [DONE] (or to the failure)
    tokens: int = 0  # generated tokens: the usage block's count, else content chunks

    @property
    def completed(self) -> bool:
        return self.failure is None and self.status == 200

    @property
    def rejected(self) -> bool:
        """A clean 429: the server said "later" instead of failing."""
        return self.failure is None and self.status == 429


class StreamCut(Exception):
    """The answer ended before its framing or the SSE said it was complete."""


def chat_body(max_tokens: int, content: str = "Count from one to twenty in words.", stream: bool = True,
              system: str | None = None) -> dict:
    messages = [{"role": "system", "content": system}] if system else []
    body: dict = {"model": "chorus", "messages": [*messages, {"role": "user", "content": content}],
                  "max_tokens": max_tokens, "temperature": 0, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}  # servers without it ignore it
    return body


def request_bytes(target: Target, body: dict, path: str = "/v1/chat/completions") -> bytes:
    """One POST with a JSON body on a connection that closes after it."""
    data = json.dumps(body).encode()
    lines = [f"POST {path} HTTP/1.1", f"Host: {target.host}:{target.port}", "Content-Type: application/json",
             f"Content-Length: {len(data)}", "Accept: text/event-stream", "Connection: close"]
    if target.api_key:
        lines.append(f"Authorization: Bearer {target.api_key}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


class SseParser:
    """Server-sent events from bytes in arbitrary pieces: the `data` of each whole event."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, data: bytes) -> list[str]:
        # The whole buffer again: a CRLF may be split between two pieces.
        self._buffer = (self._buffer + data).replace(b"\r\n", b"\n")
        events = []
        while b"\n\n" in self._buffer:
            raw, self._buffer = self._buffer.split(b"\n\n", 1)
            lines = [line[5:].removeprefix(b" ") for line in raw.split(b"\n") if line.startswith(b"data:")]
            if lines:  # comments and other fields alone carry no data
                events.append(b"\n".join(lines).decode("utf-8", "replace"))
        return events


async def read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    """The status and the headers (lower-cased names)."""
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionResetError("the server closed the connection without answering")
    parts = status_line.split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/") or not parts[1].isdigit():
        raise ValueError(f"not an HTTP status line: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    while True:
        line = await reader.readline()
        if not line:
            raise StreamCut("the connection closed inside the headers")
        if line in (b"\r\n", b"\n"):
            return int(parts[1]), headers
        name, _, value = line.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()


async def read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    """The body's bytes as they come, by its framing: chunked, Content-Length or until close."""
    try:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size = int((await reader.readuntil(b"\n")).split(b";")[0].strip(), 16)
                if size == 0:
                    while (await reader.readuntil(b"\n")).strip():  # trailers, up to the blank line
                        pass
                    return
                chunk = await reader.readexactly(size + 2)  # the data and its CRLF
                yield chunk[:-2]
        elif "content-length" in headers:
            yield await reader.readexactly(int(headers["content-length"]))
        else:
            while data := await reader.read(65536):
                yield data
    except asyncio.IncompleteReadError as exc:
        raise StreamCut("the connection closed in the middle of the answer") from exc


async def stream_chat(target: Target, body: dict, timeout_s: float) -> ClientResult:
    """Send one chat completion and read its answer to the end; never raises."""
    start = time.perf_counter()

    def failed(kind: str, detail: str, status: int | None = None) -> ClientResult:
        return ClientResult(status=status, failure=kind, detail=detail, latency_s=time.perf_counter() - start)

    progress = _Progress()
    try:
        return await asyncio.wait_for(_exchange(target, body, start, progress), timeout_s)
    except asyncio.TimeoutError:  # also the builtin TimeoutError from Python 3.11
        return failed(TIMEOUT, f"no complete answer within {timeout_s:g} s ({progress.phase})")
    except ConnectionRefusedError as exc:
        return failed(REFUSED, _say(exc))
    except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError) as exc:
        return failed(RESET, _say(exc))
    except (StreamCut, ValueError, OSError, asyncio.LimitOverrunError) as exc:  # ValueError: malformed answer
        return failed(OTHER, _say(exc))


@dataclass
class _Progress:
    """How far a request got, for the message of a timeout."""

    phase: str = "connecting"


async def _exchange(target: Target, body: dict, start: float, progress: _Progress) -> ClientResult:
    reader, writer = await asyncio.open_connection(target.host, target.port)
    try:
        progress.phase = "sending the request"
        writer.write(request_bytes(target, body))
        await writer.drain()
        progress.phase = "waiting for the response headers"
        status, headers = await read_head(reader)
        progress.phase = f"reading the HTTP {status} body"
        if status != 200:
            return await _refusal(reader, headers, status, start)
        return await _read_stream(reader, headers, start, progress)
    finally:
        writer.close()  # abrupt on purpose after a failure: the client is gone, as a real one would be


async def _refusal(reader: asyncio.StreamReader, headers: dict[str, str], status: int, start: float) -> ClientResult:
    message = await _error_message(reader, headers)
    latency = time.perf_counter() - start
    if status == 429:
        return ClientResult(status=429, detail=message, retry_after=headers.get("retry-after"), latency_s=latency)
    kind = SERVER_ERROR if status >= 500 else OTHER
    return ClientResult(status=status, failure=kind, detail=f"HTTP {status}: {message}", latency_s=latency)


async def _error_message(reader: asyncio.StreamReader, headers: dict[str, str]) -> str:
    data = b""
    try:
        async for piece in read_body(reader, headers):
            data += piece
            if len(data) > MAX_ERROR_BODY:
                break
    except (StreamCut, OSError, ValueError):
        pass  # the status alone says enough
    try:
        return str(json.loads(data)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return data[:200].decode("utf-8", "replace").strip()


async def _read_stream(reader: asyncio.StreamReader, headers: dict[str, str], start: float,
                       progress: _Progress) -> ClientResult:
    parser = SseParser()
    chunks = 0
    usage_tokens: int | None = None
    ttft: float | None = None
    async for piece in read_body(reader, headers):
        for data in parser.feed(piece):
            if data.strip() == "[DONE]":
                tokens = usage_tokens if usage_tokens is not None else chunks
                return ClientResult(status=200, ttft_s=ttft, latency_s=time.perf_counter() - start, tokens=tokens)
            event = json.loads(data)
            if not isinstance(event, dict):
                raise ValueError(f"an SSE event that is not a JSON object: {data[:80]!r}")
            if "error" in event:
                message = event["error"].get("message", "") if isinstance(event["error"], dict) else event["error"]
                return ClientResult(status=200, failure=OTHER, detail=f"error event: {message}",
                                    ttft_s=ttft, latency_s=time.perf_counter() - start)
            if any((c.get("delta") or {}).get("content") for c in event.get("choices") or ()):
                chunks += 1
                progress.phase = f"streaming, {chunks} content chunk(s) read"
                ttft = ttft if ttft is not None else time.perf_counter() - start
            if isinstance(event.get("usage"), dict):
                usage_tokens = int(event["usage"].get("completion_tokens", 0))
    raise StreamCut(f"the stream ended after {chunks} chunk(s) without [DONE]")


def _say(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
