"""The app's engine, as the OpenAI-compatible server sees an engine.

In the app the engine lives in its own process and its deltas arrive on one reader thread.
The gateway gives the server what `inference.core.engine.Engine` gives it (submit returning a
handle to iterate or wait on, cancel, metrics) and routes each delta either to a server
request's handle or to the app's tabs. So HTTP requests are requests of the same engine
as the tabs: they share one batch. No Qt here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from app.engines.input_processors import InputProcessors
from app.engines.protocol import EngineLike
from inference import (
    ChatRequest,
    Delta,
    DeltaRouter,
    EngineError,
    MetricsSnapshot,
    ModelInfo,
    RequestHandle,
    new_request_id,
)


class EngineGateway:
    """A ServedEngine over the app's main EngineLike."""

    def __init__(self, engine: Callable[[], EngineLike], metrics: Callable[[], MetricsSnapshot | None],
                 router: DeltaRouter, inputs: InputProcessors | None = None) -> None:
        self._engine = engine  # the app's current engine (it changes when a model is loaded)
        self._metrics = metrics
        self._router = router  # where the engine's deltas arrive
        self._open: set[str] = set()  # this gateway's requests, not finished yet
        self._lock = threading.Lock()
        self._inputs = inputs or InputProcessors()

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        """Render and tokenize the chat here, with the vocabulary of the app engine's model
        file (read without its weights), so the engine's process only runs it. A remote
        engine, or one still loading, gets the chat as it is."""
        processor = self._inputs.for_engine(self._engine())
        return chat if processor is None else processor.prepare(chat)

    def chat_template(self) -> str | None:
        """The template source the app engine's model renders with; None for a remote engine
        or one still loading (the server then offers tools in the generic format)."""
        processor = self._inputs.for_engine(self._engine())
        return None if processor is None else processor.template.source

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        """A raw prompt's tokens (/v1/completions); RequestError if it cannot fit."""
        processor = self._inputs.for_engine(self._engine())
        if processor is None:
            raise EngineError("the engine has no local model loaded")
        return processor.prepare_text(text, parse_special)

    def submit(self, chat: ChatRequest, on_delta: Callable[[Delta], None] | None = None) -> RequestHandle:
        request_id = chat.request_id or new_request_id("http-")
        handle = RequestHandle(request_id, self, on_delta)

        def deliver(delta: Delta) -> None:
            if delta.finished:
                with self._lock:
                    self._open.discard(request_id)
            handle.deliver(delta)

        with self._lock:
            self._open.add(request_id)
        self._router.register(request_id, deliver)
        try:
            self._engine().submit(replace(chat, request_id=request_id))
        except Exception:
            self._router.forget(request_id)
            with self._lock:
                self._open.discard(request_id)
            raise
        return handle

    def cancel(self, request_id: str) -> None:
        self._engine().cancel(request_id)

    def metrics(self, fresh: bool = False) -> MetricsSnapshot:
        snapshot = self._metrics()
        if snapshot is None:
            raise EngineError("the engine has published no metrics yet")
        return snapshot

    @property
    def info(self) -> ModelInfo | None:
        engine = self._engine()
        return engine.state.info if engine is not None else None

    def open_requests(self) -> int:
        with self._lock:
            return len(self._open)
