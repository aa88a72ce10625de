"""Requests the app makes for itself (a chat's generated title), next to the tabs' replies.

Every engine's deltas reach the app through one callback. The deltas of the app's own
requests go to whoever made them and never into a chat view; every other delta goes on
to the views. No Qt here: this runs on the engines' reader threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from inference.outputs import Delta

DeltaCallback = Callable[[Delta], None]


class OwnRequests:
    def __init__(self, to_views: DeltaCallback) -> None:
        self._to_views = to_views
        self._expected: dict[str, DeltaCallback] = {}
        self._lock = threading.Lock()

    def expect(self, request_id: str, on_delta: DeltaCallback) -> None:
        """Before submitting: the request's deltas go to on_delta, up to its last one."""
        with self._lock:
            self._expected[request_id] = on_delta

    def forget(self, request_id: str) -> None:
        """A request that was never submitted (the engine refused it)."""
        with self._lock:
            self._expected.pop(request_id, None)

    def pending(self) -> int:
        with self._lock:
            return len(self._expected)

    def on_delta(self, delta: Delta) -> None:
        with self._lock:
            own = self._expected.get(delta.request_id)
            if own is not None and delta.finished:
                del self._expected[delta.request_id]
        (own or self._to_views)(delta)
