"""The Models window's one hop: work on a worker pool (the Hub's daemon threads, or the
storage thread for the library), its answer or a one-line reason back on the GUI thread.
Once closed, nothing is answered: the widgets may be gone."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from typing import Any, TypeVar

from ui.services.daemon_pool import DaemonPool
from ui.services.threads import GuiCalls

log = logging.getLogger(__name__)

T = TypeVar("T")


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def hub_message(exc: BaseException) -> str:
    """A HubError says it all in one line; anything else is named, its traceback logged."""
    from app.models.hub import HubError

    if isinstance(exc, HubError):
        return first_line(exc)
    log.error("Hub call failed", exc_info=exc)
    return f"The Hub could not be asked: {first_line(exc)}"


def storage_message(exc: BaseException) -> str:
    """The library's LibraryError is a sentence; a database error is logged too."""
    from app.models.library import LibraryError

    if not isinstance(exc, LibraryError):
        log.error("library call failed", exc_info=exc)
    return first_line(exc)


class WorkerHops:
    def __init__(self, gui: GuiCalls) -> None:
        self.gui = gui
        self.closed = False

    def run(self, pool: DaemonPool | ThreadPoolExecutor, work: Callable[[], T], then: Callable[[T], Any],
            failed: Callable[[str], Any], describe: Callable[[BaseException], str] = hub_message) -> Future:
        """work() on pool; then(result) or failed(one line) on the GUI thread."""
        future = pool.submit(work)

        def done(f: Future) -> None:
            if self.closed or f.cancelled():
                return
            try:
                result = f.result()
            except CancelledError:
                return
            except Exception as exc:
                message = describe(exc)
                self.gui.post(lambda: self.closed or failed(message))
            else:
                self.gui.post(lambda: self.closed or then(result))

        future.add_done_callback(done)
        return future
