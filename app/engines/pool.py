"""Engines for compare panes whose model differs from the main one: one engine per model
source, shared by every pane that uses it, stopped when the last of them lets go.

Starting an engine (a process loading a model, or a check of a remote server) takes
seconds, so it happens on a thread; requests submitted meanwhile wait for it, and fail with
its error if it cannot start. No Qt here.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Protocol

from app.engines.sources import ModelSource
from inference.outputs import Delta, FinishReason
from inference.params import ChatRequest

log = logging.getLogger(__name__)


class EngineLike(Protocol):
    state: object

    def start(self, wait: bool = True) -> None: ...
    def submit(self, chat: ChatRequest) -> str: ...
    def cancel(self, request_id: str) -> None: ...
    def shutdown(self) -> None: ...


# (source, on_state) -> an engine not yet started
EngineFactory = Callable[[ModelSource, Callable[[object], None]], EngineLike]


@dataclass(eq=False)
class PooledEngine:
    source: ModelSource
    fail: Callable[[Delta], None]
    status: str = "starting"  # starting | ready | failed | stopped
    error: str | None = None
    users: int = 0
    engine: EngineLike | None = None
    _pending: list[ChatRequest] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _started: threading.Event = field(default_factory=threading.Event)

    def submit(self, chat: ChatRequest) -> None:
        with self._lock:
            if self.status == "starting":
                self._pending.append(chat)
                return
            status, error = self.status, self.error
        if status == "ready":
            try:
                self.engine.submit(chat)
                return
            except Exception as exc:  # e.g. the engine process just died
                error = str(exc)
        self._fail(chat.request_id, error or f"the engine for {self.source.label} is {status}")

    def cancel(self, request_id: str) -> None:
        with self._lock:
            waiting = [c for c in self._pending if c.request_id == request_id]
            self._pending = [c for c in self._pending if c.request_id != request_id]
        if waiting:
            self.fail(Delta.finished_with(request_id, FinishReason.CANCELLED))
        elif self.engine is not None:
            self.engine.cancel(request_id)

    def wait_started(self, timeout: float | None = None) -> bool:
        return self._started.wait(timeout)

    def start(self) -> None:
        """Runs on a thread of its own: start the engine, then send what waited for it."""
        try:
            self.engine.start(wait=True)
        except Exception as exc:
            log.error("engine for %s failed to start: %s", self.source.label, exc)
            with self._lock:
                self.status, self.error = "failed", str(exc)
                pending, self._pending = self._pending, []
            for chat in pending:
                self._fail(chat.request_id, f"{self.source.label} could not be loaded: {exc}")
        else:
            with self._lock:
                self.status = "ready"
                pending, self._pending = self._pending, []
            for chat in pending:
                self.submit(chat)
        finally:
            self._started.set()

    def _fail(self, request_id: str | None, message: str) -> None:
        if request_id is not None:
            self.fail(Delta.finished_with(request_id, FinishReason.ERROR, message))


class EnginePool:
    def __init__(self, make_engine: EngineFactory, fail: Callable[[Delta], None],
                 on_state: Callable[[ModelSource, object], None] = lambda source, state: None) -> None:
        self._make_engine = make_engine
        self._fail = fail
        self._on_state = on_state
        self._engines: dict[str, PooledEngine] = {}
        # Reentrant: the factory may ask which engines there are (to share the CPU).
        self._lock = threading.RLock()

    def acquire(self, source: ModelSource) -> PooledEngine:
        """The engine for source, started if it is new; every acquire needs a release."""
        with self._lock:
            pooled = self._engines.get(source.key)
            fresh = pooled is None or pooled.status in ("failed", "stopped")
            if fresh:
                users = pooled.users if pooled is not None else 0
                pooled = PooledEngine(source, self._fail, users=users)
                pooled.engine = self._make_engine(source, lambda state, p=pooled: self._engine_state(p, state))
                self._engines[source.key] = pooled
            pooled.users += 1
        if fresh:
            threading.Thread(target=pooled.start, name=f"engine-start-{source.label}", daemon=True).start()
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
        pooled.wait_started()  # a process half started is stopped once it is up
        pooled.status = "stopped"
        try:
            pooled.engine.shutdown()
        except Exception:
            log.exception("stopping the engine for %s failed", pooled.source.label)

    def _engine_state(self, pooled: PooledEngine, state) -> None:
        if getattr(state, "status", None) == "crashed" and pooled.status == "ready":
            # Its requests were already ended as interrupted; start it again for the next.
            log.warning("engine for %s crashed; restarting it", pooled.source.label)
            pooled.status = "starting"
            pooled._started.clear()
            threading.Thread(target=pooled.start, name="engine-restart", daemon=True).start()
        self._on_state(pooled.source, state)
