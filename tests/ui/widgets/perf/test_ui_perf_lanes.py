"""The performance panel's lanes: who uses the engine, one row per owner, fed with the
engine's snapshots as the monitor pushes them (stand-ins carrying lanes, no model)."""

from __future__ import annotations

import time

import pytest

from app.perf.hardware import HardwareSample
from inference import Lane
from tests.support.gui_app import SCREENSHOTS
from tests.support.metrics import metrics_snapshot
from tests.support.perf_panel import open_panel
from ui.theme import dark_palette, light_palette
from ui.widgets.perf.lanes import IDLE_TEXT, LINGER_S

MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
NO_GPU = HardwareSample(60.0, 900.0, (), "No NVIDIA GPU")


def tab(i: int = 0) -> Lane:
    return Lane("chat", "Trip plans", 38.0 + i % 3, 1, 0, 410)


def job(rows: int = 6, queued: int = 120, tok_s: float = 91.5) -> Lane:
    return Lane("job", "3f9c0a1b", tok_s, rows, queued, 2048)


def snapshot(*lanes: Lane):
    return metrics_snapshot(kv_cells_total=8192, kv_cells_used=2500, running=7, last_step_seqs=7,
                            decode_tok_s=130.0, lanes=lanes)


def feed(panel, snapshots, start: float, period: float = 0.25) -> float:
    """Each snapshot as one sample, `period` apart from `start`; returns the next time."""
    now = start
    for snap in snapshots:
        panel.add_sample({MODEL: snap}, NO_GPU, now=now)
        now += period
    return now


def test_a_tab_and_a_job_are_a_lane_each_with_their_figures(window, qtbot):
    panel = open_panel(window, qtbot)
    lanes = panel.lanes
    assert lanes.rows() == [] and lanes.idle.isVisible() and lanes.idle.text() == IDLE_TEXT
    feed(panel, [snapshot(tab(i), job()) for i in range(8)], time.monotonic())
    assert lanes.rows() == [("chat", "Trip plans", "39", "1", "5%", "0"),
                            ("job", "3f9c0a1b", "92", "6", "25%", "120")]
    assert not lanes.idle.isVisible()
    table = lanes.table
    assert table.rowCount() == 2 and table.item(1, 5).text() == "120"
    assert [table.horizontalHeaderItem(c).text() for c in range(6)] == ["kind", "name", "tok/s", "rows", "KV", "queue"]
    # The table is the first tile, the charts after it, none of them moved by it.
    assert lanes.isVisible() and lanes.geometry().top() == panel.chart("throughput").geometry().top()
    assert lanes.geometry().right() < panel.chart("throughput").geometry().left()


def test_a_lane_goes_a_few_seconds_after_its_owner_is_idle(window, qtbot):
    panel = open_panel(window, qtbot)
    now = feed(panel, [snapshot(tab(), job()) for _ in range(4)], time.monotonic())
    # The job ends: the engine still reports its rate over its window, with no rows, no queue.
    ended = now
    now = feed(panel, [snapshot(tab(), job(0, 0, 40.0)) for _ in range(4)], now)
    assert [row[0] for row in panel.lanes.rows()] == ["chat", "job"]  # still shown, idle
    assert panel.lanes.rows()[1][3:] == ("0", "25%", "0")
    while now < ended + LINGER_S + 0.3:
        now = feed(panel, [snapshot(tab(), job(0, 0, 10.0))], now)
    assert [row[0] for row in panel.lanes.rows()] == ["chat"]
    assert panel.lanes.table.rowCount() == 1
    # The tab's reply ends and the engine forgets it: it goes too, after the same while.
    gone = now
    while now < gone + LINGER_S + 0.3:
        now = feed(panel, [snapshot()], now)
    assert panel.lanes.rows() == [] and panel.lanes.idle.isVisible()


def test_a_lane_that_comes_back_is_one_row_again(window, qtbot):
    panel = open_panel(window, qtbot)
    now = feed(panel, [snapshot(job())], time.monotonic())
    now = feed(panel, [snapshot()] * 2, now + LINGER_S + 1)
    assert panel.lanes.rows() == []
    feed(panel, [snapshot(job(2, 3))], now)
    assert panel.lanes.rows() == [("job", "3f9c0a1b", "92", "2", "25%", "3")]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_screenshot_of_the_lanes(window, qtbot, qapp, theme):
    """For looking at: the panel docked in a 1280x800 window, a tab, an API client and a
    job sharing the engine."""
    qapp.setPalette(light_palette() if theme == "light" else dark_palette())
    panel = open_panel(window, qtbot)
    api = Lane("api", "OpenAI/Python 1.54.0", 21.0, 2, 1, 700)
    title = Lane("title", "", 4.2, 0, 1, 0)
    feed(panel, [snapshot(tab(i), api, job(5, 212), title) for i in range(120)], time.monotonic() - 30)
    qtbot.waitUntil(lambda: panel.lanes.table.rowCount() == 4)
    qtbot.wait(300)  # the staggered redraws of every chart
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert panel.grab().save(str(SCREENSHOTS / f"performance-lanes-{theme}.png"))
