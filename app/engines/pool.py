"""Engines for compare panes whose model differs from the main one: one engine per model
source, shared by every pane that uses it, stopped when the last of them lets go.

Starting an engine (a process loading a model, or a check of a remote server) takes
seconds, so it happens on a thread; requests submitted meanwhile wait for it, and fail with
its error if it cannot start. No Qt here.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from functools import partial

from app.engines.protocol import EngineState, EngineStatus, ManagedEngine, StateCallback
from app.engines.sources import LOCAL, ModelSource
from inference import ChatRequest, Delta, DeltaSink, FinishReason, MetricsSnapshot, ModelInfo, new_request_id

log = logging.getLogger(__name__)

# (source, on_state) -> an engine not yet started
EngineFactory = Callable[[ModelSource, StateCallback], ManagedEngine]


@dataclass(eq=False)
class PooledEngine:
    """A ManagedEngine for the conversations on one model source: it wraps the engine the
    factory made, keeps requests submitted while that engine starts, and fails them with
    its error if it cannot start."""

    source: ModelSource
    status: EngineStatus = EngineStatus.STARTING
    error: str | None = None
    users: int = 0
    engine: ManagedEngine | None = None
    _pending: list[tuple[ChatRequest, DeltaSink]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _started: threading.Event = field(default_factory=threading.Event)

    @property
    def state(self) -> EngineState:
        inner = self.engine.state if self.engine is not None else EngineState(self.status)
        return EngineState(self.status, info=inner.info, error=self.error or inner.error, pid=inner.pid)

    @property
    def info(self) -> ModelInfo | None:
        return self.engine.info if self.engine is not None else None

    @property
    def live(self) -> ManagedEngine:
        """The engine itself: EnginePool.acquire sets it right after making this record."""
        if self.engine is None:
            raise RuntimeError(f"no engine was made for {self.source.label}")
        return self.engine

    @property
    def is_local(self) -> bool:
        return self.source.kind == LOCAL

    def stream(self, chat: ChatRequest, sink: DeltaSink) -> str:
        request_id = chat.request_id or new_request_id()
        chat = replace(chat, request_id=request_id)
        with self._lock:
            if self.status is EngineStatus.STARTING:
                self._pending.append((chat, sink))
                return request_id
            status, error = self.status, self.error
        if status is EngineStatus.READY and self.engine is not None:
            return self.engine.stream(chat, sink)
        sink(Delta.finished_with(request_id, FinishReason.ERROR,
                                 error or f"the engine for {self.source.label} is {status.value}"))
        return request_id

    def cancel(self, request_id: str) -> None:
        with self._lock:
            waiting = [(c, sink) for c, sink in self._pending if c.request_id == request_id]
            self._pending = [(c, sink) for c, sink in self._pending if c.request_id != request_id]
        for _chat, sink in waiting:
            sink(Delta.finished_with(request_id, FinishReason.CANCELLED))
        if not waiting and self.engine is not None:
            self.engine.cancel(request_id)

    def set_priority(self, request_id: str, priority: int) -> None:
        with self._lock:
            if any(c.request_id == request_id for c, _ in self._pending):
                # still waiting for the engine to start: it goes with the new one
                self._pending = [(replace(c, priority=priority) if c.request_id == request_id else c, sink)
                                 for c, sink in self._pending]
                return
        if self.engine is not None:
            self.engine.set_priority(request_id, priority)

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        return self.live.prepare(chat) if self.status is EngineStatus.READY else chat

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        return self.live.count_tokens(texts)

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        return self.live.text_tokens(text, parse_special)

    def embed(self, inputs: list[str | list[int]]) -> Future:
        return self.live.embed(inputs)

    def metrics(self) -> MetricsSnapshot | None:
        return self.engine.metrics() if self.engine is not None else None

    def pin_system_prompt(self, text: str) -> None:
        # Only a head start: a pin that comes while the engine starts is dropped, and the
        # first chat with that prompt computes its cache instead.
        if self.status is EngineStatus.READY:
            self.live.pin_system_prompt(text)

    def unpin_system_prompt(self, text: str) -> None:
        if self.status is EngineStatus.READY:
            self.live.unpin_system_prompt(text)

    def set_threads(self, n_threads: int) -> None:
        self.live.set_threads(n_threads)

    def wait_started(self, timeout: float | None = None) -> bool:
        return self._started.wait(timeout)

    def start(self, wait: bool = True) -> None:
        """Start the engine (again, after a crash), then send what waited for it.
        wait=False does it on a thread of its own; requests wait meanwhile. Never raises:
        a failure shows in state and ends the requests that waited, with its reason."""
        with self._lock:
            self.status = EngineStatus.STARTING
            self._started.clear()
        if wait:
            self._start()
        else:
            threading.Thread(target=self._start, name=f"engine-start-{self.source.label}", daemon=True).start()

    def shutdown(self) -> None:
        self.wait_started()  # a process half started is stopped once it is up
        self.status = EngineStatus.STOPPED
        self.live.shutdown()

    def _start(self) -> None:
        try:
            self.live.start(wait=True)
        except Exception as exc:  # noqa: BLE001  (whatever stops it starting ends the waiting requests)
            log.error("engine for %s failed to start: %s", self.source.label, exc)
            with self._lock:
                self.status, self.error = EngineStatus.FAILED, str(exc)
                pending, self._pending = self._pending, []
            for chat, sink in pending:  # each has its request id: stream gave it one
                sink(Delta.finished_with(str(chat.request_id), FinishReason.ERROR,
                                         f"{self.source.label} could not be loaded: {exc}"))
        else:
            with self._lock:
                self.status = EngineStatus.READY
                pending, self._pending = self._pending, []
            for chat, sink in pending:
                self.stream(chat, sink)
        finally:
            self._started.set()


class EnginePool:
    def __init__(self, make_engine: EngineFactory,
                 on_state: Callable[[ModelSource, EngineState], None] = lambda source, state: None) -> None:
        self._make_engine = make_engine
        self._on_state = on_state
        self._engines: dict[str, PooledEngine] = {}
        # Reentrant: the factory may ask which engines there are (to share the CPU).
        self._lock = threading.RLock()

    def acquire(self, source: ModelSource) -> PooledEngine:
        """The engine for source, started if it is new; every acquire needs a release."""
        with self._lock:
            known = self._engines.get(source.key)
            fresh = known is None or known.status in (EngineStatus.FAILED, EngineStatus.STOPPED)
            if known is None or fresh:
                pooled = PooledEngine(source, users=known.users if known is not None else 0)
                pooled.engine = self._make_engine(source, partial(self._engine_state, pooled))
                self._engines[source.key] = pooled
            else:
                pooled = known
            pooled.users += 1
        if fresh:
            pooled.start(wait=False)
        return pooled

    def release(self, source: ModelSource) -> None:
        with self._lock:
            pooled = self._engines.get(source.key)
            if pooled is None:
                return
            pooled.users -= 1
            if pooled.users > 0:
                return
            del self._engines[source.key]
        threading.Thread(target=self._stop, args=(pooled,), name="engine-stop", daemon=True).start()

    def get(self, source: ModelSource) -> PooledEngine | None:
        with self._lock:
            return self._engines.get(source.key)

    def engines(self) -> list[PooledEngine]:
        with self._lock:
            return list(self._engines.values())

    def shutdown(self) -> None:
        with self._lock:
            engines, self._engines = list(self._engines.values()), {}
        for pooled in engines:
            self._stop(pooled)

    def _stop(self, pooled: PooledEngine) -> None:
        try:
            pooled.shutdown()
        except Exception:
            log.exception("stopping the engine for %s failed", pooled.source.label)

    def _engine_state(self, pooled: PooledEngine, state: EngineState) -> None:
        if state.status is EngineStatus.CRASHED and pooled.status is EngineStatus.READY:
            # Its requests were already ended as interrupted; start it again for the next.
            log.warning("engine for %s crashed; restarting it", pooled.source.label)
            pooled.start(wait=False)
        self._on_state(pooled.source, state)
