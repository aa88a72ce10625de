"""One MCP server's session, lived by one task on the manager's loop: connect (start the
command over stdio, or reach the URL), initialize and list the tools within the start
timeout, then stay ready until the server goes away or the manager stops it. Every way it
can end is a reason in words: the command that cannot start, the server that does not
answer, writes something that is not JSON-RPC, or exits (with its stderr's tail)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import os
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, TextIO, cast

import anyio
import httpx2
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from app.tools.mcp_config import HttpServer, ServerConfig
from app.tools.mcp_results import McpTool, tool_of

STDERR_TAIL = 2_000  # characters of a server's stderr kept with its failure
# The connection whose tasks are running: the SDK's own tasks for a server inherit it.
_current: contextvars.ContextVar[Connection | None] = contextvars.ContextVar("mcp_connection", default=None)


class _GarbageSaidOnce(logging.Filter):
    """The SDK logs a traceback for every stdout line of a server that is not JSON-RPC (11
    lines each: 554 for a chatty one) before the connection's one-line reason says the same.
    Dropped for a server Chorus runs; another client's in the process keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_current.get() is not None and record.getMessage().startswith("Failed to parse JSONRPC"))


logging.getLogger("mcp.client.stdio").addFilter(_GarbageSaidOnce())


class Connection:
    """report(connection, tools, reason) is called on the loop: with the tools once ready,
    then with reason (None when the manager stopped it) when it ends."""

    def __init__(self, config: ServerConfig, start_timeout_s: float,
                 report: Callable[[Connection, tuple[McpTool, ...] | None, str | None], None]) -> None:
        self.config = config
        self.start_timeout_s = start_timeout_s
        self.report = report
        self.client: Client | None = None
        self.stderr: TextIO | None = None
        self._scope: anyio.CancelScope | None = None
        self._stopping = False
        self._garbage: str | None = None  # the last line that was not JSON-RPC

    def stop(self) -> None:
        self._stopping = True
        if self._scope is not None:
            self._scope.cancel()

    def stderr_tail(self) -> str:
        if self.stderr is None:
            return ""
        fd = self.stderr.fileno()
        size = os.fstat(fd).st_size
        data = os.pread(fd, STDERR_TAIL * 4, max(0, size - STDERR_TAIL * 4))
        return data.decode("utf-8", "replace")[-STDERR_TAIL:].strip()

    async def run(self) -> None:
        _current.set(self)  # this task's context: the SDK's tasks started from it inherit it
        if not isinstance(self.config, HttpServer):
            self.stderr = cast(TextIO, tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
        try:
            reason = await self._lived()
        finally:
            self.client = None
        try:
            self.report(self, None, None if self._stopping else reason)
        finally:
            if self.stderr is not None:
                self.stderr.close()

    async def _lived(self) -> str:
        """The session from start to end; what ended it."""
        closed = anyio.Event()
        ready = False
        timer = asyncio.get_running_loop().call_later(self.start_timeout_s, lambda: self._timed_out(ready))
        try:
            with anyio.CancelScope() as self._scope:
                if self._stopping:  # stopped before this task began
                    self._scope.cancel()
                async with Client(_watched(self._transport(), closed), message_handler=self._on_message) as client:
                    tools = (await client.list_tools()).tools
                    ready = True
                    timer.cancel()
                    self.client = client
                    self.report(self, tuple(tool_of(self.config.name, t) for t in tools), None)
                    await closed.wait()
                return self._ended("closed the connection" if isinstance(self.config, HttpServer) else "exited")
        except Exception as exc:  # the SDK's groups of errors: the first one says it
            if closed.is_set() and not ready:
                return self._ended("exited before it answered" if self.stderr else "closed the connection")
            return self._ended(_reason(exc))
        finally:
            timer.cancel()
        if self._stopping:
            return "stopped"
        return self._ended(f"did not answer within {self.start_timeout_s:g} s")

    def _timed_out(self, ready: bool) -> None:
        if not ready and self._scope is not None:
            self._scope.cancel()

    def _ended(self, reason: str) -> str:
        if self._garbage is not None:
            reason += f"; it wrote what is not JSON-RPC: {self._garbage}"
        return reason

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):  # a line on stdout the SDK could not parse
            self._garbage = _what_was_written(message)

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        config = self.config
        if isinstance(config, HttpServer):
            return _http(config)
        params = StdioServerParameters(command=config.command, args=list(config.args), env=dict(config.env) or None,
                                       cwd=config.cwd, encoding_error_handler="replace")
        assert self.stderr is not None
        return stdio_client(params, errlog=self.stderr)


@asynccontextmanager
async def _http(config: HttpServer) -> AsyncIterator[Any]:
    async with AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            httpx2.AsyncClient(headers=dict(config.headers), timeout=httpx2.Timeout(30.0, read=300.0)))
        yield await stack.enter_async_context(streamable_http_client(config.url, http_client=client))


@asynccontextmanager
async def _watched(transport: AbstractAsyncContextManager[Any], closed: anyio.Event) -> AsyncIterator[Any]:
    """transport's streams, with closed set when the server's side ends (a stdio server
    that exits, an HTTP session that closes): the SDK would only fail the next request."""
    async with transport as (read, write):
        send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

        async def pump() -> None:
            async with send:
                try:
                    async for item in read:
                        await send.send(item)
                except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                    pass
            closed.set()

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(pump)
            try:
                yield receive, write
            finally:
                tasks.cancel_scope.cancel()


def _what_was_written(error: Exception) -> str:
    """The line itself, where the SDK's parse error keeps it (pydantic's input), else the error."""
    errors = getattr(error, "errors", None)
    try:
        written = errors()[0].get("input") if callable(errors) else None
    except (IndexError, TypeError, AttributeError):
        written = None
    text = repr(written) if isinstance(written, str) else (str(error).splitlines() or [type(error).__name__])[0]
    return text[:200]


def _reason(exc: BaseException) -> str:
    while isinstance(getattr(exc, "exceptions", None), tuple) and exc.exceptions:  # type: ignore[attr-defined]
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    if isinstance(exc, FileNotFoundError):
        return f"cannot start: {exc.strerror or 'no such file'}: {exc.filename or ''}".rstrip(": ")
    if isinstance(exc, OSError):
        return f"cannot start: {exc}"
    if isinstance(exc, httpx2.HTTPError):
        return f"cannot reach it: {exc}"
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:300]
