"""Python's collector on the GUI thread only (ui/services/gui_thread_gc.py): a cycle made and
dropped on a worker thread is freed on the GUI thread, never on the worker (a collection on
the storage thread once freed a Qt object there and deadlocked with the window)."""

from __future__ import annotations

import gc
import threading

from PySide6.QtCore import QObject

from ui.services.gui_thread_gc import GuiThreadCollector


class _Cycle:
    freed_on: list[str] = []

    def __init__(self) -> None:
        self.me = self
        self.qt = QObject()

    def __del__(self) -> None:
        _Cycle.freed_on.append(threading.current_thread().name)


def test_cycles_dropped_on_a_worker_are_collected_on_the_gui_thread(qtbot):
    gc.enable()  # as at the app's start (tests on Qt run with the fixture's collector: put back below)
    collector = GuiThreadCollector(check_ms=20)
    kept: list = []
    try:
        assert not gc.isenabled()
        _Cycle.freed_on.clear()

        def work() -> None:
            for _ in range(50):
                _Cycle()
            # past the young generation's threshold: automatic collection would run here
            kept.extend([i] for i in range(20_000))

        worker = threading.Thread(target=work, name="worker")
        worker.start()
        worker.join()
        assert _Cycle.freed_on == []  # nothing collected on the worker
        qtbot.waitUntil(lambda: len(_Cycle.freed_on) == 50, timeout=5_000)
        assert set(_Cycle.freed_on) == {threading.main_thread().name}
    finally:
        collector.stop()
    assert gc.isenabled()  # given back
    gc.disable()
