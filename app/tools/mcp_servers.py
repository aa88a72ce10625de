"""MCP servers run for the app and the terminal chat: their sessions live on one asyncio loop
in a thread of the manager's own, so any thread (the GUI's included) starts, restarts and
calls them without blocking: each method returns a concurrent Future (add_done_callback to
hear of the end), and call() is the blocking form for worker threads.

Per server: its state (starting, ready with its tools, failed with the reason and the tail
of its stderr, stopped), restart, and calls with a timeout. A server that hangs on a call is
an error result after the timeout, and the others (and it) stay usable; one that exits is
failed, with its stderr. shutdown() ends every session and child process."""

from __future__ import annotations

import asyncio
import enum
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp_types
from mcp import MCPError

from app.tools.mcp_config import ServerConfig
from app.tools.mcp_connection import Connection
from app.tools.mcp_results import DEFAULT_OUTPUT_CAP, McpTool, ToolResult, error_result, result_of

T = TypeVar("T")
DEFAULT_START_TIMEOUT_S = 30.0
DEFAULT_CALL_TIMEOUT_S = 60.0


class ServerStatus(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"


@dataclass(frozen=True)
class ServerState:
    config: ServerConfig
    status: ServerStatus
    tools: tuple[McpTool, ...] = ()
    reason: str | None = None  # why it failed
    stderr_tail: str = ""

    @property
    def name(self) -> str:
        return self.config.name

    def summary(self) -> str:
        if self.status is ServerStatus.READY:
            return f"ready with {len(self.tools)} tool{'s' if len(self.tools) != 1 else ''}"
        if self.status is ServerStatus.FAILED:
            return f"failed: {self.reason}"
        return self.status.value


class McpManager:
    """on_state(state) is called on the manager's thread at every change of a server's
    state: hop to your own thread from there (the GUI posts it)."""

    def __init__(self, *, start_timeout_s: float = DEFAULT_START_TIMEOUT_S, output_cap: int = DEFAULT_OUTPUT_CAP,
                 on_state: Callable[[ServerState], None] | None = None) -> None:
        self.start_timeout_s = start_timeout_s
        self.output_cap = output_cap
        self.on_state = on_state
        self._lock = threading.Lock()
        self._states: dict[str, ServerState] = {}
        self._connections: dict[str, tuple[Connection, asyncio.Task[None]]] = {}
        self._waiters: dict[str, list[Future[ServerState]]] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-servers", daemon=True)
        self._thread.start()
        self._closed = False

    def __enter__(self) -> McpManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ----- servers ---------------------------------------------------------------------------

    def start(self, config: ServerConfig) -> Future[ServerState]:
        """Starts the server (one of this name already there is stopped first); the future
        holds its state once ready or failed."""
        return self._on_loop(self._start(config))

    def start_all(self, configs: Iterable[ServerConfig], timeout_s: float | None = None) -> list[ServerState]:
        """Blocking: starts them all at once and waits until each is ready or failed."""
        futures = [self.start(c) for c in configs]
        return [f.result(timeout_s) for f in futures]

    def restart(self, name: str) -> Future[ServerState]:
        return self.start(self.state(name).config)

    def stop(self, name: str) -> Future[None]:
        """Stops the server and forgets it."""
        return self._on_loop(self._remove(name))

    def state(self, name: str) -> ServerState:
        with self._lock:
            if name not in self._states:
                raise KeyError(f"no MCP server named {name!r}")
            return self._states[name]

    def states(self) -> tuple[ServerState, ...]:
        with self._lock:
            return tuple(self._states.values())

    def tools(self) -> tuple[McpTool, ...]:
        """The tools of every ready server."""
        return tuple(t for s in self.states() if s.status is ServerStatus.READY for t in s.tools)

    # ----- calls -----------------------------------------------------------------------------

    def submit_call(self, server: str, tool: str, arguments: dict[str, Any],
                    timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> Future[ToolResult]:
        """The call's result, never an exception: an error result says what went wrong. Cancel
        the future to give up on the call."""
        return self._on_loop(self._call(server, tool, arguments, timeout_s))

    def call(self, server: str, tool: str, arguments: dict[str, Any],
             timeout_s: float = DEFAULT_CALL_TIMEOUT_S) -> ToolResult:
        """Blocking; not on the manager's own thread (an on_state callback)."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("McpManager.call would block its own loop: use submit_call")
        return self.submit_call(server, tool, arguments, timeout_s).result()

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Ends every session and child process, then the thread. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            asyncio.run_coroutine_threadsafe(self._stop_all(), self._loop).result(timeout_s)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout_s)
            if not self._thread.is_alive():
                self._loop.close()

    # ----- on the loop -----------------------------------------------------------------------

    def _on_loop(self, coroutine: Any) -> Future[Any]:
        if self._closed:
            coroutine.close()
            raise RuntimeError("the MCP manager is shut down")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    async def _start(self, config: ServerConfig) -> ServerState:
        await self._end(config.name)
        done: Future[ServerState] = Future()
        self._waiters.setdefault(config.name, []).append(done)
        connection = Connection(config, self.start_timeout_s, self._reported)
        self._set(ServerState(config, ServerStatus.STARTING))
        self._connections[config.name] = (connection, asyncio.get_running_loop().create_task(connection.run()))
        return await asyncio.wrap_future(done)

    def _reported(self, connection: Connection, tools: tuple[McpTool, ...] | None, reason: str | None) -> None:
        name = connection.config.name
        if self._connections.get(name, (None,))[0] is not connection:
            return  # one replaced by a restart: its end is no news
        if tools is not None:
            state = ServerState(connection.config, ServerStatus.READY, tools)
        elif reason is None:
            state = ServerState(connection.config, ServerStatus.STOPPED)
        else:
            state = ServerState(connection.config, ServerStatus.FAILED, reason=reason,
                                stderr_tail=connection.stderr_tail())
        self._set(state)
        if state.status is not ServerStatus.STARTING:
            for waiter in self._waiters.pop(name, []):
                waiter.set_result(state)

    async def _end(self, name: str) -> None:
        entry = self._connections.get(name)
        if entry is None:
            return
        connection, task = entry
        connection.stop()
        await asyncio.wait([task])

    async def _remove(self, name: str) -> None:
        await self._end(name)
        self._connections.pop(name, None)
        with self._lock:
            self._states.pop(name, None)

    async def _stop_all(self) -> None:
        for connection, _ in self._connections.values():
            connection.stop()
        tasks = [task for _, task in self._connections.values()]
        if tasks:
            await asyncio.wait(tasks)

    def _set(self, state: ServerState) -> None:
        with self._lock:
            self._states[state.name] = state
        if self.on_state is not None:
            self.on_state(state)

    async def _call(self, server: str, tool: str, arguments: dict[str, Any], timeout_s: float) -> ToolResult:
        entry = self._connections.get(server)
        client = entry[0].client if entry else None
        if client is None:
            state = self._states.get(server)
            return error_result(f"the MCP server {server!r} is not ready"
                                + (f" ({state.summary()})" if state else " (there is no such server)"))
        began = time.monotonic()
        try:
            result = await asyncio.wait_for(client.call_tool(tool, arguments, read_timeout_seconds=timeout_s),
                                            timeout_s + 1.0)  # the SDK's own timeout first, this one in case
        except (asyncio.TimeoutError, TimeoutError):
            return error_result(f"{tool} did not answer within {timeout_s:g} s", time.monotonic() - began)
        except MCPError as exc:
            took = time.monotonic() - began
            if exc.code == mcp_types.REQUEST_TIMEOUT:
                return error_result(f"{tool} did not answer within {timeout_s:g} s", took)
            return error_result(f"{tool} failed: {exc.message}", took)
        except Exception as exc:  # a result that does not parse, a transport that broke
            return error_result(f"{tool} failed: {type(exc).__name__}: {exc}", time.monotonic() - began)
        return result_of(result, time.monotonic() - began, self.output_cap)

