"""The two hops every controller makes: to the storage thread and back to the GUI thread.

Storage calls run in order on one thread (SQLite writes never contend with each other and
the GUI never waits on the disk); their results come back as asyncio tasks on qasync's
loop, which is the Qt event loop. Engine and monitor threads reach the GUI through
GuiCalls, a queued signal.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from PySide6.QtCore import QObject, Qt, Signal

log = logging.getLogger(__name__)

T = TypeVar("T")


class GuiCalls(QObject):
    """Runs callables on the GUI thread, in order, from any thread."""

    _call = Signal(object)

    def __init__(self) -> None:
        super().__init__()
        self._call.connect(lambda fn: fn(), Qt.ConnectionType.QueuedConnection)

    def post(self, fn: Callable[[], None]) -> None:
        self._call.emit(fn)


class StorageThread:
    """One thread for every storage call; `run` hands the result back on the GUI thread."""

    def __init__(self, on_error: Callable[[Exception], None]) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="chorus-storage")
        self._on_error = on_error
        self._closed = False  # shut down: the window is closing, its views get no more results

    def submit(self, work: Callable[..., T], *args: Any) -> Future[T]:
        return self.executor.submit(work, *args)

    def run(self, work: Callable[[], T], then: Callable[[T], Any] | None = None,
            failed: Callable[[Exception], Any] | None = None) -> asyncio.Task:
        """work() on the storage thread; then(result) back on the GUI thread. If work
        raises, failed(exc) there too (a view puts back what it showed as done), after the
        window's one-line message.

        The work is queued here and now, not when the task first runs: a write asked for
        just before the window closes would otherwise reach the thread after `shutdown`
        (or never, the loop having stopped) and be lost. Queued now, `shutdown` drains it,
        in order. Their `then` is left undone once the thread is shut down: the window is
        gone, and a reply would only ask for more (tabs reopened, models listed)."""
        try:
            queued = asyncio.wrap_future(self.executor.submit(work))
        except RuntimeError as exc:  # asked for after shutdown: logged below, not raised in a view
            queued = asyncio.get_event_loop().create_future()
            queued.set_exception(exc)

        async def hop() -> None:
            try:
                result = await queued
            except Exception as exc:
                log.error("storage call failed: %s", exc)
                if self._closed:
                    return  # the window is gone: the log alone says so
                self._on_error(exc)
                if failed is not None:
                    failed(exc)
                return
            if then is not None and not self._closed:
                then(result)

        return asyncio.ensure_future(hop())

    def shutdown(self) -> None:
        """Once every call asked for so far is done, in order (the writes of a closing window)."""
        self._closed = True
        self.executor.shutdown(wait=True)
