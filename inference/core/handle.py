"""The caller's side of one request: its deltas to iterate, or its result to wait for."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Protocol

from inference.errors import EngineError
from inference.outputs import Delta, FinishReason, RequestStats
from inference.params import ChatRequest, new_request_id

log = logging.getLogger(__name__)

DeltaCallback = Callable[[Delta], None]


@dataclass(frozen=True, slots=True)
class Completion:
    request_id: str
    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    error: str | None
    stats: RequestStats | None


class Canceller(Protocol):
    """Whoever runs a request, as its handle needs it: something to pass a cancel to."""

    def cancel(self, request_id: str) -> None: ...


class Streamer(Canceller, Protocol):
    """An engine client as a handle needs it (inference.EngineClient has this and more)."""

    def stream(self, chat: ChatRequest, sink: DeltaCallback) -> str: ...


class RequestHandle:
    """The caller's side of one request: iterate its deltas or wait for the result.

    Whoever runs the request feeds the handle through deliver(): the engine thread here, or
    a router outside the engine loop (the app's gateway, for an engine in another process).
    """

    @classmethod
    def open(cls, engine: Streamer, chat: ChatRequest, on_delta: DeltaCallback | None = None) -> RequestHandle:
        """A request started on any engine client, with a handle to iterate or wait on."""
        request_id = chat.request_id or new_request_id()
        handle = cls(request_id, engine, on_delta)
        engine.stream(replace(chat, request_id=request_id), handle.deliver)
        return handle

    def __init__(self, request_id: str, engine: Canceller, on_delta: DeltaCallback | None) -> None:
        self.request_id = request_id
        self._engine = engine
        self._on_delta = on_delta
        self._deltas: queue.SimpleQueue[Delta] = queue.SimpleQueue()
        self._done = threading.Event()
        self._text: list[str] = []
        self._tokens: list[int] = []
        self.final: Delta | None = None

    def deliver(self, delta: Delta) -> None:
        """Hand the caller the next delta of this request.

        Only for the source of the request's deltas, never for the caller: one thread at a
        time, deltas in order, the finished one last (it wakes result() and ends iteration).
        """
        self._text.append(delta.text)
        self._tokens.extend(delta.token_ids)
        if delta.finished:
            self.final = delta
        self._deltas.put(delta)
        if self._on_delta is not None:
            try:
                self._on_delta(delta)
            except Exception:  # a listener's bug must not stop the engine
                log.exception("delta callback failed for %s", self.request_id)
        if delta.finished:
            self._done.set()

    def __iter__(self) -> Iterator[Delta]:
        while True:
            delta = self._deltas.get()
            yield delta
            if delta.finished:
                return

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def result(self, timeout: float | None = None) -> Completion:
        if not self._done.wait(timeout):
            raise TimeoutError(f"request {self.request_id} still running after {timeout}s")
        final = self.final
        if final is None or final.finish_reason is None:  # done is set by the finished delta alone
            raise EngineError(f"request {self.request_id} is done without a final delta")
        return Completion(
            self.request_id,
            "".join(self._text),
            tuple(self._tokens),
            final.finish_reason,
            final.error,
            final.stats,
        )

    def cancel(self) -> None:
        self._engine.cancel(self.request_id)
