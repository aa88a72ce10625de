"""The Models window's small parts on their own: how sizes, counts, speeds and times read,
the download's speed meter, the status bar's download sign, and the daemon pool the Hub
calls run on. No Hub, no database."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

from PySide6.QtCore import Qt

from tests.support.shown import shown
from ui.services.daemon_pool import DaemonPool
from ui.services.downloads import SpeedMeter
from ui.widgets.models.download_status import DownloadStatus
from ui.widgets.models.model_sizes import count_text, progress_text, when_text


def test_counts_sizes_and_times_read_short():
    assert [count_text(n) for n in (7, 1234, 3_400_000, 2_000_000_000)] == ["7", "1.2k", "3.4M", "2.0B"]
    assert progress_text(8 << 20, 100 << 20, 12.5 * (1 << 20)) == "8.0 MiB of 100.0 MiB · 12.5 MiB/s"
    assert progress_text(512, 0, None) == "512 B"  # no total known yet, no speed yet
    now = datetime(2026, 12, 1, 15, 0, tzinfo=timezone.utc)
    assert when_text(None, now) == "never"
    assert when_text(datetime(2026, 12, 1, 9, 5, tzinfo=timezone.utc), now) == "today 09:05"
    assert when_text(datetime(2026, 11, 28, 9, 5, tzinfo=timezone.utc), now) == "2026-11-28"


def test_the_speed_is_over_the_last_seconds_not_the_whole_download():
    meter = SpeedMeter(window=3.0)
    assert meter.add(0.0, 0) is None  # one sample: no speed yet
    assert meter.add(1.0, 10_000_000) == 10_000_000
    meter.add(2.0, 20_000_000)
    for t in range(3, 10):  # then it stalls at 20 MB
        speed = meter.add(float(t), 20_000_000)
    assert speed == 0.0  # the fast start has left the window


def test_the_status_bar_sign_shows_progress_and_a_click_asks_for_the_window(qtbot):
    sign = shown(qtbot, DownloadStatus(), 320, 24)
    sign.hide()
    sign.set_progress("a-very-long-model-file-name-Q4_K_M-00001-of-00002.gguf", None, "starting")
    assert sign.isVisible() and sign.bar.maximum() == 0  # busy until the size is known
    assert sign.label.text().endswith("…") and "00001-of-00002.gguf" in sign.toolTip()
    sign.set_progress("m.gguf", 0.25, "25 MiB of 100 MiB")
    assert sign.label.text() == "Downloading m.gguf 25%" and sign.bar.value() == 250
    with qtbot.waitSignal(sign.clicked):
        qtbot.mouseClick(sign, Qt.MouseButton.LeftButton)
    sign.clear()
    assert not sign.isVisible()


def test_the_daemon_pool_runs_in_order_and_shutdown_cancels_what_has_not_started():
    pool = DaemonPool(1, "test-pool")
    started, gate = threading.Event(), threading.Event()
    first = pool.submit(lambda: started.set() or gate.wait(10))
    queued = pool.submit(lambda: "never")
    assert started.wait(10)  # the one worker is busy with the first
    failing = DaemonPool(1, "test-pool-2").submit(lambda: 1 / 0)
    pool.shutdown()
    gate.set()
    assert first.result(10) is True
    assert queued.cancelled()
    assert isinstance(failing.exception(10), ZeroDivisionError)  # handed to whoever reads it
    assert all(t.daemon for t in threading.enumerate() if t.name.startswith("test-pool"))


def test_the_models_window_opens_whole_on_the_screen(window, qtbot):
    """Its 1120x660 default was larger than a small screen (offscreen's is 800x600) and went
    over its edge: it opens within the screen's free area, over the main window."""
    from ui.widgets.models.models_window import ModelsWindow

    window.move(200, 100)
    models = ModelsWindow(8192, window)
    models.bring_up()
    qtbot.waitExposed(models)
    area = window.screen().availableGeometry()
    assert area.contains(models.frameGeometry()), (area, models.frameGeometry())
    assert models.width() >= min(800, area.width() * 0.8)  # still roomy where there is room
