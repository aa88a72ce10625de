"""Garbage-collector pauses in the GUI process.

CPython's full (generation 2) collection walks every container object alive, and holds the
GIL while it does: with Qt, pyqtgraph, SQLAlchemy and numpy loaded that is a heap of several
hundred thousand objects, and one full collection took 159 ms in `chorus bench-ui --tabs 16`
(in the engine-reader thread, so the GUI thread could not draw meanwhile: the run's one
stall over 50 ms). Almost all of that heap is made at start-up and lives as long as the app.
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> int:
    """Collect once, then move every object alive now (imported modules, the window, the
    controllers) into the collector's permanent generation: later full collections only walk
    what was made since. Call once, when start-up is done. Returns how many objects it froze."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
