"""The app's engine, as the OpenAI-compatible server sees an engine.

In the app the engine lives in its own process and its deltas arrive on one reader thread.
The gateway gives the server what `inference.engine.Engine` gives it (submit returning a
handle to iterate or wait on, cancel, metrics) and routes each delta either to a server
request's handle or to the app's tabs. So HTTP requests are requests of the same engine
as the tabs: they share one batch. No Qt here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace

from app.engines.prompts import PromptTokenizers
from app.engines.protocol import EngineLike
from inference.engine import RequestHandle
from inference.errors import EngineError
from inference.ids import new_request_id
from inference.metrics import MetricsSnapshot
from inference.outputs import Delta
from inference.params import ChatRequest


class EngineGateway:
    """A ServedEngine over the app's main EngineLike."""

    def __init__(self, engine: Callable[[], EngineLike], metrics: Callable[[], MetricsSnapshot | None],
                 to_app: Callable[[Delta], None]) -> None:
        self._engine = engine  # the app's current engine (it changes when a model is loaded)
        self._metrics = metrics
        self._to_app = to_app
        self._handles: dict[str, RequestHandle] = {}
        self._lock = threading.Lock()
        self._prompts = PromptTokenizers()

    def on_delta(self, delta: Delta) -> None:
        """Every delta of the engine comes through here (on its reader thread)."""
        with self._lock:
            handle = self._handles.get(delta.request_id)
            if handle is not None and delta.finished:
                del self._handles[delta.request_id]
        if handle is None:
            self._to_app(delta)
        else:
            handle.deliver(delta)

    def prepare(self, chat: ChatRequest) -> ChatRequest:
        """Render and tokenize the chat here, with the vocabulary of the app engine's model
        file (read without its weights), so the engine's process only runs it. A remote
        engine, or one still loading, gets the chat as it is."""
        tokenizer = self._prompts.for_engine(self._engine())
        return chat if tokenizer is None else tokenizer.prepare(chat)

    def text_tokens(self, text: str, parse_special: bool = True) -> list[int]:
        """A raw prompt's tokens (/v1/completions); RequestError if it cannot fit."""
        tokenizer = self._prompts.for_engine(self._engine())
        if tokenizer is None:
            raise EngineError("the engine has no local model loaded")
        tokens = tokenizer.text_tokens(text, parse_special)
        tokenizer.check_prompt(tokens)
        return tokens

    def submit(self, chat: ChatRequest, on_delta: Callable[[Delta], None] | None = None) -> RequestHandle:
        request_id = chat.request_id or new_request_id("http-")
        handle = RequestHandle(request_id, self, on_delta)
        with self._lock:
            self._handles[request_id] = handle
        try:
            self._engine().submit(replace(chat, request_id=request_id))
        except Exception:
            with self._lock:
                self._handles.pop(request_id, None)
            raise
        return handle

    def cancel(self, request_id: str) -> None:
        self._engine().cancel(request_id)

    def metrics(self, fresh: bool = False) -> MetricsSnapshot:
        snapshot = self._metrics()
        if snapshot is None:
            raise EngineError("the engine has published no metrics yet")
        return snapshot

    def open_requests(self) -> int:
        with self._lock:
            return len(self._handles)
