"""Deltas to whoever asked for them, by request id: the one router every hop uses.

The engine thread hands each request's deltas to its handle; the app's reader thread hands
an engine process's deltas to an HTTP client's handle, to a request the app made for itself
(a chat's title) or, for everything else, to the chat views. Each of those is a DeltaRouter:
a request is registered with its sink before it is submitted, its deltas go there up to its
finished one, which unregisters it, and the deltas of requests nobody registered go to the
fallback (or nowhere).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from inference.outputs import Delta, FinishReason

log = logging.getLogger(__name__)

DeltaSink = Callable[[Delta], None]


class DeltaRouter:
    """Thread-safe: requests are registered on any thread; deltas are routed on the one
    thread that delivers them (in order, the finished delta last)."""

    def __init__(self, fallback: DeltaSink | None = None) -> None:
        self._fallback = fallback
        self._sinks: dict[str, DeltaSink] = {}
        self._lock = threading.Lock()

    def register(self, request_id: str, sink: DeltaSink) -> None:
        """Before submitting: the request's deltas go to sink, up to its finished one."""
        with self._lock:
            self._sinks[request_id] = sink

    def forget(self, request_id: str) -> None:
        """A request that was never submitted after all (the engine refused it)."""
        with self._lock:
            self._sinks.pop(request_id, None)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._sinks

    def __len__(self) -> int:
        return len(self._sinks)

    def open_ids(self) -> list[str]:
        """The requests registered and not finished yet."""
        with self._lock:
            return list(self._sinks)

    def route(self, delta: Delta) -> None:
        with self._lock:
            sink = self._sinks.get(delta.request_id)
            if sink is not None and delta.finished:
                del self._sinks[delta.request_id]
        target = sink or self._fallback
        if target is None:
            return
        try:
            target(delta)
        except Exception:  # a listener's bug must not stop the thread that delivers
            log.exception("delta listener failed for %s", delta.request_id)

    def finish_all(self, reason: FinishReason, error: str | None = None) -> None:
        """End every open request with a finished delta of its own (its engine is gone)."""
        with self._lock:
            ids = list(self._sinks)
        for request_id in ids:
            self.route(Delta.finished_with(request_id, reason, error))
