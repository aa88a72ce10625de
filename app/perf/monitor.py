"""Feeds the performance panel four times a second: the engine's latest metrics snapshot
(pushed by the engine process) and a hardware sample taken here, off the GUI thread."""

from __future__ import annotations

import threading
from collections.abc import Callable

from app.perf.hardware import HardwareSampler

PERIOD_S = 0.25


class PerfMonitor:
    def __init__(self, metrics: Callable[[], object], deliver: Callable[[object, object], None],
                 period_s: float = PERIOD_S) -> None:
        self._metrics = metrics
        self._deliver = deliver  # called on the monitor thread; it must hop to the GUI itself
        self._period = period_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="perf-monitor", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        sampler = HardwareSampler()
        while not self._stop.wait(self._period):
            self._deliver(self._metrics(), sampler.sample())
