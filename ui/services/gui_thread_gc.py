"""Python's cyclic garbage collector, run on the GUI thread only.

Left automatic, a collection runs on whichever thread happens to allocate past the
threshold: the storage thread, the engine reader, a document worker. When it frees a Qt
object caught in a reference cycle there, PySide disconnects the object's signals holding
Qt's signal-slot lock and then waits for the GIL, while the GUI thread, holding the GIL,
waits for that lock to connect a signal: both wait for ever (seen in a test run:
`StorageThread`'s collection in `QObject::disconnect`, the window in `connectImpl`). Qt's
objects must die on the thread that owns them; so automatic collection is off and a timer
on the GUI thread collects each generation when its count passes the threshold, as the
automatic collector would (the pattern PyQt's users have long used).
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

# How often the GUI thread looks: between two looks the young generation grows past its
# threshold (700 allocations) at most for this long.
CHECK_MS = 500


class GuiThreadCollector(QObject):
    """Turns automatic collection off while it lives; stop() turns it back on."""

    def __init__(self, parent: QObject | None = None, check_ms: int = CHECK_MS) -> None:
        super().__init__(parent)
        self._was_enabled = gc.isenabled()
        gc.disable()
        self._timer = QTimer(self)
        self._timer.timeout.connect(self.check)
        self._timer.start(check_ms)

    def check(self) -> None:
        """Collect the generations whose counts passed their thresholds (on this thread)."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        generation = -1
        for i in range(3):
            if counts[i] <= thresholds[i]:
                break
            generation = i
        if generation >= 0:
            gc.collect(generation)

    def stop(self, generation: int = 2) -> None:
        """Collect what is left here (up to generation: a full collection walks the whole
        heap, ~0.1 s), then give collection back to the interpreter."""
        self._timer.stop()
        gc.collect(generation)
        if self._was_enabled:
            gc.enable()
