"""Runs an engine in its own process and talks to it over a pipe.

A llama.cpp abort (or any crash) in the engine then takes down only that process: the
client notices the closed pipe, ends every request that was in flight with an error, and
the caller may restart it. No Qt here; callbacks run on the client's reader thread.
"""

from __future__ import annotations

import itertools
import logging
import multiprocessing as mp
import os
import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import TYPE_CHECKING, Any

from app.engines.protocol import EngineState, EngineStatus
from inference import (
    BackendInfo,
    ChatRequest,
    Delta,
    DeltaRouter,
    DeltaSink,
    EngineError,
    FinishReason,
    LoadSettings,
    MetricsSnapshot,
    ModelInfo,
    ModelLoadError,
    RequestError,
    new_request_id,
)

if TYPE_CHECKING:
    from inference import Engine

log = logging.getLogger(__name__)

START_TIMEOUT_S = 120.0
CRASH_MESSAGE = "the engine process stopped unexpectedly (exit code {code})"


# ----- the child process ----------------------------------------------------------------

ENGINE_NICENESS = 5  # CFS weight 335 against the window's 1024: a third of the share when both want a core


def _yield_to_the_window() -> None:
    """The engine's threads fill every core. When the window has work (opening the
    performance panel, a tab's layout), the kernel should run it first: a slightly lower
    priority costs the engine nothing while the window is idle, and keeps the GUI's
    stalls short when it is not. Best effort: some systems forbid it."""
    try:
        os.nice(ENGINE_NICENESS)
    except (AttributeError, OSError):
        pass


def _worker_main(settings: LoadSettings, conn) -> None:
    from inference import Engine

    _yield_to_the_window()
    send_lock = threading.Lock()

    def send(message: tuple) -> None:
        with send_lock:
            try:
                conn.send(message)
            except (BrokenPipeError, OSError):
                pass  # the parent is gone; the loop below ends on its own

    try:
        engine = Engine.start(
            settings,
            on_metrics=lambda m: send(("metrics", m)),
            on_progress=lambda fraction: send(("progress", fraction)),
        )
    except ModelLoadError as exc:
        send(("load_error", str(exc)))
        return
    send(("ready", engine.info))

    def forward(delta: Delta) -> None:
        send(("delta", delta))

    preparer = Preparer(engine, forward)
    calls = CallServer(engine, send)
    try:
        while True:
            try:
                kind, *args = conn.recv()
            except (EOFError, OSError):
                break
            if kind == "submit":
                preparer.submit(args[0])
            elif kind == "cancel":
                preparer.cancel(args[0])
            elif kind == "priority":
                preparer.set_priority(*args)
            elif kind == "pin":
                engine.pin_system_prompt(args[0])
            elif kind == "unpin":
                engine.unpin_system_prompt(args[0])
            elif kind == "threads":
                engine.set_threads(args[0])
            elif kind == "call":
                calls.submit(*args)
            elif kind == "shutdown":
                break
    finally:
        preparer.stop()
        calls.stop()
        engine.shutdown()


# What the window's process asks the engine's process and waits for (EngineProcess.call):
# the work that needs the model's vocabulary or weights, which that process never loads.
CALLS = ("prepare", "count_tokens", "text_tokens", "embed")
# Errors that cross the pipe as themselves; any other becomes an EngineError with its text.
_ERRORS: dict[str, type[Exception]] = {"RequestError": RequestError, "ModelLoadError": ModelLoadError,
                                       "EngineError": EngineError}


class CallServer:
    """Answers the parent's calls on threads of its own (a tokenized 50,000-message chat or
    a batch of embeddings must not hold the pipe's reader or each other)."""

    WORKERS = 4

    def __init__(self, engine: Engine, send: Callable[[tuple], None]) -> None:
        self._engine = engine
        self._send = send
        self._pool = ThreadPoolExecutor(self.WORKERS, thread_name_prefix="engine-call")

    def submit(self, call_id: int, name: str, args: tuple) -> None:
        self._pool.submit(self._answer, call_id, name, args)

    def _answer(self, call_id: int, name: str, args: tuple) -> None:
        try:
            if name not in CALLS:
                raise EngineError(f"the engine has no call named {name!r}")
            value = getattr(self._engine, name)(*args)
            if isinstance(value, Future):
                value = value.result()
            reply: tuple = (call_id, True, value)
        except Exception as exc:  # every failure is the caller's to see, never this thread's end
            if not isinstance(exc, tuple(_ERRORS.values())):
                log.exception("engine call %s failed", name)
            reply = (call_id, False, (type(exc).__name__, str(exc)))
        self._send(("reply", reply))

    def stop(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def call_error(kind: str, message: str) -> Exception:
    """An error the engine's process sent, as the exception it was there."""
    return _ERRORS.get(kind, EngineError)(message)


class Preparer:
    """Renders and tokenizes submitted chats on a thread of its own in the engine's
    process, then hands them to the engine in the order they came: a chat of 32,000
    messages must not hold the engine thread's steps, nor the pipe's reader (cancels).

    A cancel for a chat still waiting here ends it here; the lock makes "still here" and
    "handed to the engine" exclusive, so no cancel falls between them.
    """

    def __init__(self, engine: Engine, forward: Callable[[Delta], None]) -> None:
        self._engine = engine
        self._forward = forward
        self._queue: queue.SimpleQueue[ChatRequest | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting: set[str] = set()
        self._cancelled: set[str] = set()
        self._priorities: dict[str, int] = {}  # set while the chat was still being prepared
        self._thread = threading.Thread(target=self._run, name="engine-preparer", daemon=True)
        self._thread.start()

    def submit(self, chat: ChatRequest) -> None:
        assert chat.request_id is not None  # the client names every request
        with self._lock:
            self._waiting.add(chat.request_id)
        self._queue.put(chat)

    def cancel(self, request_id: str) -> None:
        with self._lock:
            if request_id in self._waiting:
                self._cancelled.add(request_id)
                return
        self._engine.cancel(request_id)

    def set_priority(self, request_id: str, priority: int) -> None:
        with self._lock:
            if request_id in self._waiting:
                self._priorities[request_id] = priority  # applied when handed to the engine
                return
        self._engine.set_priority(request_id, priority)

    def stop(self) -> None:
        self._queue.put(None)

    def _run(self) -> None:
        while (chat := self._queue.get()) is not None:
            request_id = chat.request_id or ""
            try:
                prepared = self._engine.prepare(chat) if request_id not in self._cancelled else chat
            except (RequestError, EngineError) as exc:  # a bad chat; the engine stopping
                prepared, error = None, str(exc)
            except Exception as exc:  # a bug in templating ends that request, not the thread
                log.exception("could not prepare request %s", request_id)
                prepared, error = None, f"could not start: {exc}"
            with self._lock:
                self._waiting.discard(request_id)
                if prepared is not None and request_id in self._priorities:
                    prepared = replace(prepared, priority=self._priorities[request_id])
                self._priorities.pop(request_id, None)
                if request_id in self._cancelled:
                    self._cancelled.discard(request_id)
                    self._forward(Delta.finished_with(request_id, FinishReason.CANCELLED))
                elif prepared is None:
                    self._forward(Delta.finished_with(request_id, FinishReason.ERROR, error))
                else:
                    try:
                        self._engine.stream(prepared, self._forward)
                    except EngineError as exc:  # shutting down
                        self._forward(Delta.finished_with(request_id, FinishReason.ERROR, str(exc)))


def _backend_info() -> BackendInfo:
    from inference import backend

    return backend.backend_info()


def probe_backend() -> BackendInfo:
    """The llama.cpp build's versions and abilities, asked of a short-lived process of the
    engine's kind (about a second): for a process that must not load llama.cpp itself (the
    window's) before any engine has reported them."""
    with mp.get_context("spawn").Pool(1) as pool:
        info: BackendInfo = pool.apply(_backend_info)
        return info


# ----- the parent side ----------------------------------------------------------------------


class EngineProcess:
    """The engine in a process of its own, as the app's engines are (ManagedEngine): requests
    and their deltas over a pipe, and what needs the model (tokens, embeddings) asked of it."""

    is_local = True

    def __init__(
        self,
        settings: LoadSettings,
        on_metrics: Callable[[MetricsSnapshot], None] = lambda m: None,
        on_state: Callable[[EngineState], None] = lambda s: None,
        on_progress: Callable[[float], None] = lambda f: None,
    ) -> None:
        self.settings = settings
        self._on_metrics = on_metrics
        self._on_state = on_state
        self._on_progress = on_progress
        self._ctx = mp.get_context("spawn")  # no inherited threads or llama state
        # The requests in flight, each to its sink: ended by this side when the process dies.
        self._deltas = DeltaRouter()
        self._outbox: queue.SimpleQueue = queue.SimpleQueue()
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self._stopping = False
        self._calls: dict[int, Future] = {}  # calls asked of the engine's process, by id
        self._call_ids = itertools.count(1)
        self._calls_lock = threading.Lock()
        self._metrics: MetricsSnapshot | None = None
        self.state = EngineState(EngineStatus.STOPPED)

    # ----- lifecycle ---------------------------------------------------------------

    def start(self, wait: bool = True) -> None:
        """Spawn the engine process. wait=False returns at once; state reports progress."""
        parent, child = self._ctx.Pipe()
        self._outbox = queue.SimpleQueue()  # one per process: nothing stale reaches a new one
        process = self._ctx.Process(
            target=_worker_main, args=(self.settings, child), name="chorus-engine", daemon=True
        )
        self._process = process
        self._stopping = False
        process.start()
        child.close()
        self._conn = parent
        self._set_state(EngineState(EngineStatus.STARTING, pid=process.pid))
        ready = threading.Event()
        outbox = self._outbox
        threading.Thread(target=self._read, args=(parent, process, ready, outbox), name="engine-reader",
                         daemon=True).start()
        threading.Thread(target=self._write, args=(parent, outbox), name="engine-writer", daemon=True).start()
        if wait:
            if not ready.wait(START_TIMEOUT_S):
                raise EngineError("the engine process did not start in time")
            if self.state.status is not EngineStatus.READY:
                raise ModelLoadError(self.state.error or "the engine process failed to start")

    def restart(self, wait: bool = True, settings: LoadSettings | None = None) -> None:
        """Start again, on other settings (another model) if given."""
        self.shutdown()
        if settings is not None:
            self.settings = settings
        self.start(wait)

    def shutdown(self, timeout: float = 30.0) -> None:
        if self._process is None:
            return
        self._stopping = True
        self._outbox.put(("shutdown",))
        self._outbox.put(None)
        self._process.join(timeout)
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5)
        self._fail_in_flight("the engine was stopped")
        self._process = None
        self._set_state(EngineState(EngineStatus.STOPPED))

    def kill(self) -> None:
        """Hard-kill the engine process (what a crash looks like from here)."""
        if self._process is not None:
            self._process.kill()

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    # ----- requests ------------------------------------------------------------------

    def stream(self, chat: ChatRequest, sink: DeltaSink) -> str:
        request_id = chat.request_id or new_request_id()
        if self.state.status not in (EngineStatus.READY, EngineStatus.STARTING):
            sink(Delta.finished_with(request_id, FinishReason.ERROR, f"the engine is {self.state.status.value}"))
            return request_id
        self._deltas.register(request_id, sink)
        self._outbox.put(("submit", replace(chat, request_id=request_id)))
        return request_id

    def cancel(self, request_id: str) -> None:
        self._outbox.put(("cancel", request_id))

    def set_priority(self, request_id: str, priority: int) -> None:
        self._outbox.put(("priority", request_id, priority))

    def pin_system_prompt(self, text: str) -> None:
        self._outbox.put(("pin", text))

    def unpin_system_prompt(self, text: str) -> None:
        self._outbox.put(("unpin", text))

    def set_threads(self, n_threads: int) -> None:
        """CPU threads for the engine from its next step (and after a restart)."""
        if n_threads == self.settings.n_threads:
            return
        self.settings = replace(self.settings, n_threads=n_threads, n_threads_batch=n_threads)
        self._outbox.put(("threads", n_threads))

    def in_flight(self) -> set[str]:
        return set(self._deltas.open_ids())

    # ----- what needs the model: asked of the engine's process ----------------------------

    @property
    def info(self) -> ModelInfo | None:
        return self.state.info

    def metrics(self) -> MetricsSnapshot | None:
        """The latest snapshot the engine's process sent (every 0.1 s while it works);
        EngineError while the engine is not running."""
        if self.state.status is not EngineStatus.READY:
            raise EngineError(f"the engine is {self.state.status.value}")
        return self._metrics

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        """The chat rendered, tokenized and checked by the engine's process (RequestError for
        one it would refuse); the window's process holds no vocabulary."""
        prepared: ChatRequest = self.call("prepare", chat).result()
        return prepared

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        counts: list[int] = self.call("count_tokens", list(texts)).result()
        return counts

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        tokens: list[int] = self.call("text_tokens", text, parse_special).result()
        return tokens

    def embed(self, inputs: list[str | list[int]]) -> Future:
        """A future of (vectors, tokens each read) from the engine's process."""
        return self.call("embed", inputs)

    def call(self, name: str, *args: Any) -> Future:
        """A call answered by the engine's process: a future of its value, or of the error it
        raised there (RequestError, ModelLoadError, EngineError; EngineError when the process
        is not running or dies before answering)."""
        future: Future = Future()
        if self.state.status is not EngineStatus.READY:
            future.set_exception(EngineError(f"the engine is {self.state.status.value}"))
            return future
        with self._calls_lock:
            call_id = next(self._call_ids)
            self._calls[call_id] = future
        self._outbox.put(("call", call_id, name, args))
        return future

    def _answered(self, call_id: int, ok: bool, value: Any) -> None:
        with self._calls_lock:
            future = self._calls.pop(call_id, None)
        if future is None:
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(call_error(*value))

    def _fail_calls(self, message: str) -> None:
        with self._calls_lock:
            pending, self._calls = list(self._calls.values()), {}
        for future in pending:
            future.set_exception(EngineError(message))

    # ----- threads -------------------------------------------------------------------

    def _write(self, conn, outbox: queue.SimpleQueue) -> None:
        while True:
            message = outbox.get()
            if message is None:
                return
            try:
                conn.send(message)
            except (BrokenPipeError, OSError):
                return

    def _read(self, conn: Connection, process: BaseProcess, ready: threading.Event,
              outbox: queue.SimpleQueue) -> None:
        try:
            while True:
                kind, payload = conn.recv()
                if kind == "delta":
                    self._deltas.route(payload)
                elif kind == "reply":
                    self._answered(*payload)
                elif kind == "metrics":
                    self._metrics = payload
                    self._on_metrics(payload)
                elif kind == "progress":
                    self._on_progress(payload)
                elif kind == "ready":
                    self._set_state(EngineState(EngineStatus.READY, info=payload, pid=process.pid))
                    ready.set()
                elif kind == "load_error":
                    self._set_state(EngineState(EngineStatus.FAILED, error=payload))
                    ready.set()
                    return
        except (EOFError, OSError):
            pass
        finally:
            ready.set()
            outbox.put(None)
            self._fail_calls("the engine process stopped before answering")
        if not self._stopping and self.state.status is not EngineStatus.FAILED:
            process.join(5)
            code = process.exitcode
            crashed = EngineState(EngineStatus.CRASHED, error=f"exit code {code}")
            # Dead before anyone hears of it: a caller told its reply was cut who then asks
            # (a server's /health, a retry) must not find the engine ready. The listener
            # last: it may start the engine again, and the new process's requests are not
            # the ones to end.
            self.state = crashed
            self._fail_in_flight(CRASH_MESSAGE.format(code=code), FinishReason.INTERRUPTED)
            self._set_state(crashed)

    def _fail_in_flight(self, message: str, reason: FinishReason = FinishReason.CANCELLED) -> None:
        self._deltas.finish_all(reason, message)

    def _set_state(self, state: EngineState) -> None:
        self.state = state
        try:
            self._on_state(state)
        except Exception:
            log.exception("state listener failed")
