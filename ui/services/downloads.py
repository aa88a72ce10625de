"""Hub downloads, one at a time, on a worker thread: HubClient.download blocks, reports its
progress from that thread and stops when its cancel event is set. The GUI hears about it
through this object's signals (queued across threads), every PROGRESS_S or every percent,
with the speed over the last few seconds."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal

if TYPE_CHECKING:
    from app.models.hub import DownloadProgress, HubClient, HubFile

log = logging.getLogger(__name__)

PROGRESS_S = 0.1  # progress reaches the GUI ten times a second,
PROGRESS_STEPS = 100  # or each percent, whichever comes first (a fast line: 100 updates in all)
SPEED_WINDOW_S = 3.0  # the speed shown is over this many seconds


@dataclass(frozen=True, slots=True)
class DownloadUpdate:
    file: HubFile
    filename: str  # the part being written
    done_bytes: int  # of the whole file, every part
    total_bytes: int
    speed: float | None  # bytes per second, None until there are two samples

    @property
    def fraction(self) -> float | None:
        return min(1.0, self.done_bytes / self.total_bytes) if self.total_bytes else None


class SpeedMeter:
    """Bytes per second over the last window seconds."""

    def __init__(self, window: float = SPEED_WINDOW_S) -> None:
        self.window = window
        self.samples: deque[tuple[float, int]] = deque()

    def add(self, now: float, done: int) -> float | None:
        self.samples.append((now, done))
        while len(self.samples) > 2 and now - self.samples[0][0] > self.window:
            self.samples.popleft()
        (t0, d0), (t1, d1) = self.samples[0], self.samples[-1]
        return (d1 - d0) / (t1 - t0) if t1 > t0 else None


class Downloads(QObject):
    started = Signal(object)  # HubFile
    progressed = Signal(object)  # DownloadUpdate
    finished = Signal(object, object)  # HubFile, installed Path (its first part)
    failed = Signal(object, str)  # HubFile, one line
    cancelled = Signal(object)  # HubFile
    _ended = Signal(object)  # from the worker: the signal to send, once current is cleared

    def __init__(self, client: Callable[[], HubClient], models_dir: Path,
                 installed: Callable[[HubFile, Path], None] | None = None) -> None:
        """client: the HubClient, made on first use; installed(file, path) runs on the worker
        thread once the file is in place (the library records it before anyone is told)."""
        super().__init__()
        self._client = client
        self.models_dir = models_dir
        self._installed = installed
        self.current: HubFile | None = None
        self.latest: DownloadUpdate | None = None
        self._cancel = threading.Event()
        self._thread: threading.Thread | None = None
        self._ended.connect(self._on_ended, Qt.ConnectionType.QueuedConnection)

    @property
    def running(self) -> bool:
        return self.current is not None

    def start(self, file: HubFile) -> threading.Thread | None:
        """Downloads file on a worker thread; None when one is already running."""
        if self.current is not None:
            return None
        self.current, self.latest = file, None
        self._cancel = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(file, self._cancel), name="hub-download",
                                        daemon=True)
        self.started.emit(file)
        self._thread.start()
        return self._thread

    def cancel(self) -> None:
        self._cancel.set()  # the worker stops at its next chunk and says cancelled

    def shutdown(self, timeout: float = 2.0) -> None:
        """Stops a running download (its partial file stays, for resuming next time)."""
        self.cancel()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self, file: HubFile, cancel: threading.Event) -> None:  # on the worker thread
        from app.models.hub import DownloadCancelled, HubError

        report = self._reporter(file)
        try:
            path = self._client().download(file, self.models_dir, progress=report, cancel=cancel)
            if self._installed is not None:
                self._installed(file, path)
        except DownloadCancelled:
            self._end(lambda: self.cancelled.emit(file))
        except HubError as exc:
            message = str(exc)
            self._end(lambda: self.failed.emit(file, message))
        except Exception as exc:  # a bug or a disk error: one line here, the traceback in the log
            log.exception("downloading %s failed", file.name)
            message = f"download failed: {_one_line(exc)}"
            self._end(lambda: self.failed.emit(file, message))
        else:
            self._end(lambda: self.finished.emit(file, path))

    def _end(self, tell: Callable[[], None]) -> None:
        self._ended.emit(tell)

    def _on_ended(self, tell: Callable[[], None]) -> None:  # on the GUI thread
        self.current = None  # before the signal: a listener may start the next one
        tell()

    def _reporter(self, file: HubFile) -> Callable[[DownloadProgress], None]:
        meter = SpeedMeter()
        last = [0.0, -1]  # when, and how many bytes, the GUI was last told

        def report(p: DownloadProgress) -> None:
            now = time.monotonic()
            speed = meter.add(now, p.done_bytes)
            step = max(1, (p.total_bytes or file.size_bytes) // PROGRESS_STEPS)
            if now - last[0] < PROGRESS_S and p.done_bytes - last[1] < step and p.done_bytes < p.total_bytes:
                return  # told less than PROGRESS_S ago, and not a percent further since
            last[0], last[1] = now, p.done_bytes
            update = DownloadUpdate(file, p.filename, p.done_bytes, p.total_bytes or file.size_bytes, speed)
            self.latest = update
            self.progressed.emit(update)  # queued: the receiver lives on the GUI thread

        return report


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
