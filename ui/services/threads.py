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

    def submit(self, work: Callable[..., T], *args: Any) -> Future[T]:
        return self.executor.submit(work, *args)

    def run(self, work: Callable[[], T], then: Callable[[T], Any] | None = None,
            failed: Callable[[Exception], Any] | None = None) -> asyncio.Task:
        """work() on the storage thread; then(result) back on the GUI thread. If work
        raises, failed(exc) there too (a view puts back what it showed as done), after the
        window's one-line message."""

        async def hop() -> None:
            try:
                result = await asyncio.get_running_loop().run_in_executor(self.executor, work)
            except Exception as exc:
                log.error("storage call failed: %s", exc)
                self._on_error(exc)
                if failed is not None:
                    failed(exc)
                return
            if then is not None:
                then(result)

        return asyncio.ensure_future(hop())

    def shutdown(self) -> None:
        self.executor.shutdown(wait=True)
