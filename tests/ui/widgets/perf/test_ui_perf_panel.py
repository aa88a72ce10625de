"""The performance panel without a model: charts built in slices when it opens, legends
under the plots, one unit per axis, GPU charts only with a GPU (a stand-in sample carrying
NVML-like figures), the theme's colours, docking and floating without resizing the window."""

from __future__ import annotations

import math
import time

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QPalette

from app.perf.hardware import GpuSample, HardwareSample
from inference.core.metrics import MetricsSnapshot
from tests.support.gui_app import SCREENSHOTS
from tests.support.metrics import metrics_snapshot
from tests.support.perf_panel import open_panel
from tests.support.shown import shown
from ui.theme import dark_palette, light_palette
from ui.widgets.perf.chart import DARK_COLOURS, LIGHT_COLOURS
from ui.widgets.perf.panel import CHARTS
from ui.widgets.window.main_window import MainWindow

NO_GPU = "No NVIDIA GPU or driver (LibraryNotFound)"  # what HardwareSampler says without pynvml
WAIT_MS = 30_000  # the charts are built one by one on a timer after showing: on a loaded machine, seconds


def snapshot(i: int) -> MetricsSnapshot:
    """A metrics snapshot as the engine process pushes them, with moving figures."""
    return metrics_snapshot(
        time_s=float(i), prefill_tok_s=400 + 100 * math.sin(i / 7), decode_tok_s=150 + 30 * math.sin(i / 5),
        last_step_seqs=12, last_step_tokens=12 + i % 30, max_step_seqs=16, running=12, queued=3,
        kv_cells_used=2000 + 10 * i, kv_cells_total=8192, kv_cells_shared=300, prefix_lookups=20,
        prefix_hits=15, ttft_p50_s=0.2, ttft_p95_s=0.5, itl_p50_s=0.05, itl_p95_s=0.09)


def hardware(i: int, gpu: bool) -> HardwareSample:
    """What HardwareSampler.sample() returns: with one GPU (as NVML reports it) or none."""
    if not gpu:
        return HardwareSample(80.0, 900.0 + i, (), NO_GPU)
    card = GpuSample(0, "NVIDIA H200", 60 + 20 * math.sin(i / 4), 20_000 + 50 * i, 143_771, 50.0, 300.0)
    return HardwareSample(80.0, 900.0 + i, (card,), None)


def feed(panel, count: int, gpu: bool) -> None:
    now = time.monotonic()
    for i in range(count):
        engines = {"SmolLM2-135M-Instruct.Q4_1.gguf": snapshot(i)}
        panel.add_sample(engines, hardware(i, gpu), now=now - (count - i) * 0.25)


def test_the_charts_are_built_when_the_panel_opens_one_at_a_time(window, qtbot):
    panel = window.perf_panel
    assert panel.chart("throughput") is None  # nothing built with the window
    built = []
    original = panel._build_next
    panel._build_next = lambda: (original(), built.append(len(panel._charts)))
    panel._build_timer.timeout.disconnect()
    panel._build_timer.timeout.connect(panel._build_next)
    open_panel(window, qtbot)
    # One chart per event-loop turn, not all of them in the call that opened the panel.
    assert built[:3] == [1, 2, 3] and len(panel._charts) == len(panel.wanted_charts())


def test_legends_are_under_the_plots_in_the_window_s_font(window, qtbot):
    import pyqtgraph as pg

    panel = open_panel(window, qtbot)
    feed(panel, 40, gpu=False)
    for spec in panel.wanted_charts():
        chart = panel.chart(spec.key)
        assert not [i for i in chart.view.scene().items() if isinstance(i, pg.LegendItem)]
        # Outside the plot (once laid out: the last chart was built a moment ago).
        qtbot.waitUntil(lambda c=chart: c.legend.geometry().top() > c.view.geometry().bottom() > 100)
        assert chart.legend.font().pointSizeF() >= window.font().pointSizeF()
        for label in chart.legend_labels():
            assert label in chart.legend.text()


def _unit(series: str) -> str:
    """The unit a series' values are in, from what they measure."""
    for marker, unit in (("tok/s", "tok/s"), ("%", "%"), ("MiB", "MiB"), ("GiB", "GiB"), ("TTFT", "ms"),
                         ("ITL", "ms"), ("cells", "cells"), ("tokens", "tokens")):
        if marker in series:
            return unit
    return "requests"  # sequences, running, queued


def test_each_chart_has_one_unit_on_its_labelled_axis(window, qtbot):
    panel = open_panel(window, qtbot)
    for spec in CHARTS:
        units = {_unit(key) for key, _label in spec.series}
        assert units == {spec.unit}, spec.title
    for spec in panel.wanted_charts():
        chart = panel.chart(spec.key)
        assert chart.left.labelText == spec.unit
        assert chart.title.text().endswith(f" · {spec.unit}")  # said beside the title, whole
    feed(panel, 40, gpu=False)
    # A share in % keeps its 0-100 scale (a steady 75% hit rate is not a flat line at the top).
    qtbot.waitUntil(lambda: panel.chart("prefix").box.viewRange()[1][1] >= 100)


def test_gpu_charts_only_when_the_machine_reports_a_gpu(window, qtbot):
    panel = open_panel(window, qtbot)
    feed(panel, 20, gpu=False)
    qtbot.wait(100)
    assert panel.chart("gpu_load") is None and panel.chart("gpu_memory") is None
    assert panel.gpu_label.text() == NO_GPU
    feed(panel, 20, gpu=True)  # a stand-in for HardwareSampler on an NVIDIA machine
    qtbot.waitUntil(lambda: panel.charts_ready() and panel.chart("gpu_memory") is not None, timeout=WAIT_MS)
    load = panel.chart("gpu_load")
    qtbot.waitUntil(lambda: load.isVisible() and panel.chart("gpu_memory").isVisible(), timeout=WAIT_MS)
    def drawn() -> int:  # the points on the GPU load curve (the first 20 samples had none)
        ys = load.curves["GPU util %"].getData()[1]
        return 0 if ys is None else int((ys == ys).sum())

    qtbot.waitUntil(lambda: drawn() >= 20, timeout=WAIT_MS)
    assert max(v for v in panel.series("GPU util %") if v == v) > 40
    assert panel.series("GPU total GiB")[-1] == pytest.approx(143_771 / 1024)
    assert "NVIDIA H200" in panel.gpu_label.text()


def test_the_plots_follow_the_theme(window, qtbot, qapp):
    panel = open_panel(window, qtbot)
    chart = panel.chart("throughput")
    assert chart.view.backgroundBrush().color() == light_palette().color(QPalette.ColorRole.Base)
    assert LIGHT_COLOURS[0] in chart.legend.text()
    qapp.setPalette(dark_palette())
    panel.apply_theme()  # also runs by itself on the palette change
    assert chart.view.backgroundBrush().color() == dark_palette().color(QPalette.ColorRole.Base)
    assert DARK_COLOURS[0] in chart.legend.text()
    assert chart.curves["decode tok/s"].opts["pen"].color().name() == DARK_COLOURS[1]


def test_the_palette_change_alone_re_themes_the_plots(window, qtbot, qapp):
    panel = open_panel(window, qtbot)
    chart = panel.chart("kv")
    qapp.setPalette(dark_palette())
    qtbot.waitUntil(lambda: chart.view.backgroundBrush().color() == dark_palette().color(QPalette.ColorRole.Base))


def test_the_panel_floats_and_docks_back_without_resizing_the_window(window, qtbot):
    panel = open_panel(window, qtbot)
    feed(panel, 40, gpu=False)
    size = window.size()
    panel.setFloating(True)
    qtbot.waitUntil(lambda: panel.isFloating() and panel.isVisible())
    qtbot.wait(50)  # the layouts settle over a couple of events
    assert window.size() == size
    assert panel.width() >= 300 and panel.height() >= 200
    assert all(panel.chart(s.key).isVisible() for s in panel.wanted_charts())
    panel.setFloating(False)
    qtbot.waitUntil(lambda: not panel.isFloating() and panel.isVisible())
    qtbot.wait(50)
    assert window.size() == size


def test_docked_at_the_right_the_charts_take_one_column(window, qtbot):
    panel = open_panel(window, qtbot)
    window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, panel)
    window.resizeDocks([panel], [320], Qt.Orientation.Horizontal)
    qtbot.waitUntil(lambda: panel._columns == 1)
    first, second = panel.chart("throughput"), panel.chart("requests")
    qtbot.waitUntil(lambda: second.y() > first.y())  # one under the other
    assert window.size().width() == 1280


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_screenshot_of_the_panel_with_a_gpu(window, qtbot, qapp, theme):
    """For looking at: the docked panel at 1280x800 with a (stand-in) GPU's charts."""
    qapp.setPalette(light_palette() if theme == "light" else dark_palette())
    panel = open_panel(window, qtbot)
    feed(panel, 200, gpu=True)
    qtbot.waitUntil(lambda: panel.charts_ready() and panel.chart("gpu_load") is not None, timeout=WAIT_MS)
    qtbot.wait(300)  # the staggered redraws of every chart
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    assert window.grab().save(str(SCREENSHOTS / f"performance-panel-gpu-{theme}.png"))


def test_the_panel_fits_a_900x600_window_without_growing_it(qtbot):
    """The smallest window the app keeps usable: showing the panel takes its room from the
    chat, never from the screen (over a comparison, the tallest view, it grew the window to
    900x645)."""
    small = shown(qtbot, MainWindow(), 900, 600)
    view, _made = small.open_compare(2, "")
    for conversation_id in (3, 4):
        view.add_pane(conversation_id, "")
    panel = open_panel(small, qtbot)
    feed(panel, 40, gpu=False)
    qtbot.waitUntil(lambda: all(panel.chart(s.key).isVisible() for s in panel.wanted_charts()), timeout=WAIT_MS)
    qtbot.wait(50)  # the layouts settle over a couple of events
    assert (small.width(), small.height()) == (900, 600)
    assert panel.height() >= 150 and small.centralWidget().height() > 0


@pytest.fixture
def small_panel(qtbot):
    """The panel in a 900x600 window: three charts to a row, each under 300 px wide."""
    small = shown(qtbot, MainWindow(), 900, 600)
    panel = open_panel(small, qtbot)
    feed(panel, 40, gpu=False)
    qtbot.waitUntil(lambda: all(panel.chart(s.key).isVisible() for s in panel.wanted_charts()), timeout=WAIT_MS)
    qtbot.wait(50)  # the layouts settle over a couple of events
    return panel


def test_time_labels_keep_apart_in_a_narrow_chart(small_panel):
    from PySide6.QtGui import QFontMetrics

    gap_px = 12  # at least this much room between two labels ("90 s ago60 s ago" had about 5)
    for spec in small_panel.wanted_charts():
        axis = small_panel.chart(spec.key).bottom
        metrics = QFontMetrics(axis.style["tickFont"] or axis.font())
        ticks = [(value, text) for value, text in axis._tickLevels[0] if text]
        spacing = axis.width() * (ticks[1][0] - ticks[0][0]) / 120.0  # the x range is the last 120 s
        widest = max(metrics.horizontalAdvance(text) for _value, text in ticks)
        assert spacing - widest >= gap_px, (spec.key, spacing, widest)


def test_every_legend_entry_is_shown_whole_in_a_narrow_chart(small_panel):
    for spec in small_panel.wanted_charts():
        legend = small_panel.chart(spec.key).legend
        assert legend.sizeHint().width() <= legend.width(), (spec.key, legend.text())
        for label in small_panel.chart(spec.key).legend_labels():
            assert label in legend.text()


def test_an_idle_panel_s_axes_start_at_zero_with_plain_unit_labels(qtbot):
    """Issue 39, defect 13: idle, the axes ran -400..400 and the unit labels were cut
    ("tok/s (x0.00..."). Idle or busy, each axis starts at 0 and says its unit alone."""
    small = shown(qtbot, MainWindow(), 900, 600)
    panel = open_panel(small, qtbot)
    now = time.monotonic()
    idle = metrics_snapshot(time_s=0.0)
    for i in range(20):
        panel.add_sample({"SmolLM2-135M-Instruct.Q4_1.gguf": idle}, hardware(i, gpu=False), now=now - (20 - i) * 0.25)

    def ranges() -> dict[str, tuple[float, float]]:
        return {s.key: tuple(panel.chart(s.key).box.viewRange()[1]) for s in panel.wanted_charts()}

    qtbot.waitUntil(lambda: all(low == 0 and high > 0 for low, high in ranges().values()))
    for spec in panel.wanted_charts():
        chart = panel.chart(spec.key)
        assert "(" not in chart.left.labelString(), chart.left.labelString()  # no "(x0.001)"
        assert chart.title.text().endswith(f" · {spec.unit}")
        ticks = [text for _value, text in chart.left._tickLevels[0]]
        assert ticks[0] == "0" and len(ticks) == 3, ticks  # three numbers, apart in a short chart
    feed(panel, 40, gpu=False)  # busy: tokens in the hundreds
    qtbot.waitUntil(lambda: ranges()["throughput"][0] == 0 and ranges()["throughput"][1] >= 400)
    assert "(" not in panel.chart("throughput").left.labelString()
