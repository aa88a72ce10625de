"""The live performance panel: what the engine and the machine are doing, over the last
minutes. It only draws: samples are pushed to it (PerfMonitor, off the GUI thread)."""

from __future__ import annotations

import time
from collections import deque

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDockWidget,
    QFrame,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

from ui.widgets.chat.context_meter import ElidedLabel
from ui.widgets.perf.chart import CHART_H, CHART_MIN_H, MIN_CHART_W, ChartSpec, PerfChart
from ui.widgets.perf.lanes import LanesTable
from ui.widgets.perf.tiles import Tiles

WINDOW_S = 300.0  # samples kept: the last five minutes
VIEW_S = 120.0  # shown: the last two minutes
STAGGER_MS = 20  # between two charts' redraws: all of them within one sample period (250 ms)
BUILD_MS = 5  # between two charts' creation while the panel opens: the event loop runs between

CHART_COLUMNS = 4  # at most; fewer when the panel is narrow (docked at the right, or floating)
MIN_BODY_HEIGHT = 60  # the dock's least: its title and a line or two of what scrolls inside

# One unit per chart (its left axis); the legend labels are the series' short names.
CHARTS = (
    ChartSpec("throughput", "Throughput", "tok/s", (("prefill tok/s", "prefill"), ("decode tok/s", "decode"))),
    ChartSpec("requests", "Requests", "requests",
              (("sequences", "in the last step"), ("running", "running"), ("queued", "queued"))),
    ChartSpec("batch", "Batch size", "tokens", (("tokens", "tokens in the last step"),)),
    ChartSpec("kv", "KV cache", "cells", (("cells used", "used"), ("cells shared", "shared"),
                                          ("cells total", "total"))),
    ChartSpec("prefix", "Prefix cache", "%", (("hit rate %", "hits per lookup"),), y_max=100),
    ChartSpec("latency", "Latency", "ms", (("TTFT p50", "TTFT p50"), ("TTFT p95", "TTFT p95"),
                                          ("ITL p50", "ITL p50"), ("ITL p95", "ITL p95"))),
    ChartSpec("cpu", "CPU (app + engine)", "%", (("CPU %", "CPU, 100% = one core"),)),
    ChartSpec("memory", "Memory (app + engine)", "MiB", (("RAM MiB", "resident memory"),)),
    ChartSpec("gpu_load", "GPU load", "%", (("GPU util %", "utilisation"),), gpu=True, y_max=100),
    ChartSpec("gpu_memory", "GPU memory", "GiB", (("GPU mem GiB", "used"), ("GPU total GiB", "total")), gpu=True),
)
HARDWARE_SERIES = ("CPU %", "RAM MiB", "GPU util %", "GPU mem GiB", "GPU total GiB")
ENGINE_SERIES = tuple(key for c in CHARTS for key, _label in c.series if key not in HARDWARE_SERIES)


class PerfPanel(QDockWidget):
    def __init__(self, parent=None) -> None:
        super().__init__("Performance", parent)
        self.setObjectName("performancePanel")
        self._t0 = time.monotonic()
        self._times: deque[float] = deque()
        # Series per engine (by its model's name), and the machine's under "".
        self._data: dict[str, dict[str, deque[float]]] = {}
        self._latest: dict[str, object] = {}
        self._has_gpu = False  # GPU charts only once a sample carries GPU figures
        self.engine_box = QComboBox()
        self.engine_box.setToolTip("The engine the charts show, when several models are loaded")
        self.engine_box.currentIndexChanged.connect(lambda _i: self._redraw(self._times[-1] if self._times else 0.0))
        # The charts are built when the panel first opens, one per event-loop turn (see
        # _build_next): building all of them at once stalled the GUI, and most sessions never
        # open the panel.
        self._charts: dict[str, PerfChart] = {}
        self._columns = CHART_COLUMNS
        self._build_timer = QTimer(self)
        self._build_timer.setSingleShot(True)
        self._build_timer.setInterval(BUILD_MS)
        self._build_timer.timeout.connect(self._build_next)
        # One line each, beside the engine's name, elided with the whole text in a tooltip:
        # in a panel a quarter of a 900x600 window high the charts keep the room (issue 39,
        # defect 9: wrapped, they pushed the charts out of sight).
        self.summary = ElidedLabel()
        self.gpu_label = ElidedLabel()
        self.summary.setText("waiting for the engine…")
        body = QWidget()
        self._tiles = Tiles(MIN_CHART_W, CHART_H)
        # Who uses the engine, in the first tile: a table, cheap to build with the panel.
        self.lanes = LanesTable(self._tiles)
        # Everything scrolls inside the dock, the engine line and the summary too: the dock
        # asks for little more than its title, so opening the panel takes room from the chat
        # and never grows the window (over a comparison, the tallest view, a dock that asked
        # for its whole header plus the charts' minimum grew a 900x600 window to 900x645).
        content = QWidget()
        inner = QVBoxLayout(content)
        inner.setContentsMargins(0, 0, 0, 0)
        top = self._header = QHBoxLayout()
        top.addWidget(QLabel("Engine:"))
        top.addWidget(self.engine_box, 1)
        top.addWidget(self.summary, 3)
        top.addWidget(self.gpu_label, 1)
        inner.addLayout(top)
        inner.addWidget(self._tiles, 1)
        self._scroll = QScrollArea()
        self._scroll.setWidgetResizable(True)
        self._scroll.setFrameShape(QFrame.Shape.NoFrame)
        self._scroll.setWidget(content)
        self._scroll.setMinimumHeight(MIN_BODY_HEIGHT)
        box = QVBoxLayout(body)
        box.setContentsMargins(6, 2, 6, 2)
        box.addWidget(self._scroll, 1)
        self.setWidget(body)
        self.setAllowedAreas(Qt.DockWidgetArea.BottomDockWidgetArea | Qt.DockWidgetArea.RightDockWidgetArea)

    # ----- charts -----------------------------------------------------------------------

    def wanted_charts(self) -> list[ChartSpec]:
        """The charts this machine has figures for: no GPU charts without a GPU."""
        return [c for c in CHARTS if self._has_gpu or not c.gpu]

    def chart(self, key: str) -> PerfChart | None:
        """A chart, once built (None before the panel first opened, or for a GPU chart
        without a GPU)."""
        return self._charts.get(key)

    def charts_ready(self) -> bool:
        return all(c.key in self._charts for c in self.wanted_charts())

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self.charts_ready():
            self._place_charts()  # the empty cells first, at their final sizes
            self._build_timer.start()

    def _build_next(self) -> None:
        """Builds one missing chart, and schedules the next: each one is a short slice of
        GUI time (a few ms), with the event loop running in between."""
        if not self.isVisible():
            return  # resumes when shown again
        spec = next((c for c in self.wanted_charts() if c.key not in self._charts), None)
        if spec is None:
            return
        self._charts[spec.key] = PerfChart(spec, VIEW_S)
        self._place_charts()
        if self._times:
            self._draw_chart(spec, [t - self._times[-1] for t in self._times])
        if not self.charts_ready():
            self._build_timer.start()

    def _place_charts(self) -> None:
        """Every wanted chart's slot is kept from the start: a chart arriving never moves or
        resizes the ones already drawn."""
        self._tiles.set_slots([self.lanes, *(self._charts.get(c.key) for c in self.wanted_charts())], self._columns)

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        # Charts flow into as many columns as fit: four docked at the bottom, fewer docked at
        # the right or floating in a small window.
        columns = max(1, min(CHART_COLUMNS, self._scroll.viewport().width() // MIN_CHART_W))
        if columns != self._columns:
            self._columns = columns
            self._place_charts()
        # A short panel: a row of charts as high as the room under the engine's line, so one
        # row shows whole (the rest scroll); a tall one keeps the charts' full height.
        room = self._scroll.viewport().height() - self._header.sizeHint().height() - 6
        self._tiles.set_tile_height(max(CHART_MIN_H, min(CHART_H, room)))

    def apply_theme(self) -> None:
        """Re-reads the application's palette: plot backgrounds, axes and curve colours (the
        labels follow the palette by themselves). Callable right after a theme switch: the
        widgets' own palettes only catch up through posted events, and each chart re-reads
        its own then too (PerfChart.changeEvent)."""
        palette = QApplication.palette(self)
        for chart in self._charts.values():
            chart.apply_theme(palette)

    # ----- samples ----------------------------------------------------------------------

    def add_sample(self, engines: dict, hardware, now: float | None = None) -> None:
        """One point per series. engines: {name: MetricsSnapshot or None (not ready yet)},
        the main engine first."""
        now = time.monotonic() if now is None else now
        self._times.append(now)
        for name, metrics in engines.items():
            self._append(name, _engine_values(metrics))
            self._latest[name] = metrics
        for name in [n for n in self._data if n and n not in engines]:
            self._append(name, {})  # an engine that was unloaded: a gap, until it scrolls off
        self._append("", _hardware_values(hardware))
        while self._times and self._times[0] < now - WINDOW_S:
            self._times.popleft()
            for series in self._data.values():
                for values in series.values():
                    values.popleft()
        self._forget_gone(engines)
        self._sync_engine_box(engines)
        if hardware is not None and hardware.gpus and not self._has_gpu:
            self._has_gpu = True  # the GPU charts join the others (built like them)
            if self.isVisible():
                self._place_charts()
                self._build_timer.start()
        self._redraw(now)
        self.lanes.show_lanes(self._latest.get(self.engine()), now)
        self._set_line(self.summary, _summary(self._latest.get(self.engine()), engines, self._latest))
        self._set_line(self.gpu_label, _gpu_text(hardware))

    @staticmethod
    def _set_line(label: QLabel, text: str) -> None:
        if label.text() != text:  # 4 samples a second: a repaint only when it says something new
            label.setText(text)
            label.setToolTip(text)

    def _append(self, engine: str, values: dict[str, float]) -> None:
        names = HARDWARE_SERIES if engine == "" else ENGINE_SERIES
        if engine not in self._data:  # a new engine: its past is empty, not missing
            self._data[engine] = {n: deque([float("nan")] * (len(self._times) - 1)) for n in names}
        for name, series in self._data[engine].items():
            series.append(values.get(name, float("nan")))

    def _forget_gone(self, engines: dict) -> None:
        for name in [n for n in self._data if n and n not in engines]:
            if all(v != v for v in self._data[name]["sequences"]):  # nothing left in the window
                del self._data[name]
                self._latest.pop(name, None)

    def _sync_engine_box(self, engines: dict) -> None:
        names = [n for n in self._data if n]
        if [self.engine_box.itemText(i) for i in range(self.engine_box.count())] == names:
            return
        current = self.engine()
        self.engine_box.blockSignals(True)
        self.engine_box.clear()
        self.engine_box.addItems(names)
        self.engine_box.setCurrentIndex(max(0, names.index(current)) if current in names else 0)
        self.engine_box.blockSignals(False)

    def engine(self) -> str:
        """The engine on the charts."""
        return self.engine_box.currentText()

    def engines(self) -> list[str]:
        return [n for n in self._data if n]

    def series(self, name: str, engine: str | None = None) -> list[float]:
        if name in HARDWARE_SERIES:
            return list(self._data.get("", {}).get(name, ()))
        engine = self.engine() if engine is None else engine
        return list(self._data.get(engine, {}).get(name, ()))

    def _redraw(self, now: float) -> None:
        if not self.isVisible():
            return  # nothing to draw for a hidden dock; the data keeps its window
        xs = [t - now for t in self._times]
        # One chart per slot, spread over the sample period, so the GUI thread never
        # spends one long stretch repainting all of them.
        built = [c for c in self.wanted_charts() if c.key in self._charts]
        for k, spec in enumerate(built):
            # With the panel as context, a pending draw dies with the panel.
            QTimer.singleShot(k * STAGGER_MS, self, lambda spec=spec: self._draw_chart(spec, xs))

    def _draw_chart(self, spec: ChartSpec, xs: list[float]) -> None:
        chart = self._charts[spec.key]
        n = len(xs)
        shown = next((i for i, x in enumerate(xs) if x >= -VIEW_S), n)  # older points are off the left
        highest = 0.0
        for key, _label in spec.series:
            ys = self.series(key)[-n:]
            chart.curves[key].setData(xs[-len(ys):], ys, skipFiniteCheck=True)
            highest = max([highest, *(y for y in ys[max(0, shown - (n - len(ys))):] if y == y)])  # NaN: a gap
        chart.fit_y(highest)


def _engine_values(m) -> dict[str, float]:
    out: dict[str, float] = {}
    if m is not None:
        out.update({
            "prefill tok/s": m.prefill_tok_s,
            "decode tok/s": m.decode_tok_s,
            "sequences": float(m.last_step_seqs),
            "tokens": float(m.last_step_tokens),
            "running": float(m.running),
            "queued": float(m.queued),
            "cells used": float(m.kv_cells_used),
            "cells shared": float(m.kv_cells_shared),
            "cells total": float(m.kv_cells_total),
            "hit rate %": 100.0 * m.prefix_hit_rate,
        })
        for key, value in (("TTFT p50", m.ttft_p50_s), ("TTFT p95", m.ttft_p95_s),
                           ("ITL p50", m.itl_p50_s), ("ITL p95", m.itl_p95_s)):
            if value is not None:
                out[key] = 1000.0 * value
    return out


def _hardware_values(hw) -> dict[str, float]:
    out: dict[str, float] = {}
    if hw is not None:
        out["CPU %"] = hw.cpu_pct
        out["RAM MiB"] = hw.rss_mib
        if hw.gpus:  # all GPUs together: their mean load, their summed memory
            out["GPU util %"] = sum(g.utilization_pct for g in hw.gpus) / len(hw.gpus)
            out["GPU mem GiB"] = sum(g.memory_used_mib for g in hw.gpus) / 1024
            out["GPU total GiB"] = sum(g.memory_total_mib for g in hw.gpus) / 1024
    return out


def _summary(m, engines: dict, latest: dict) -> str:
    others = ""
    if len(engines) > 1:  # one line on every engine, so a comparison's are side by side
        others = "\n" + " · ".join(
            f"{name}: {x.decode_tok_s:.0f} tok/s, batch {x.last_step_seqs}" if x is not None else f"{name}: loading"
            for name, x in ((n, latest.get(n)) for n in engines)
        )
    if m is None:
        return "waiting for the engine…" + others
    return (
        f"{m.decode_tok_s:.0f} tok/s decode · {m.prefill_tok_s:.0f} tok/s prefill · "
        f"batch {m.last_step_seqs} (max {m.max_step_seqs}) · {m.running} running · {m.queued} queued · "
        f"KV {m.kv_cells_used}/{m.kv_cells_total} cells, {m.kv_cells_shared} shared · "
        f"prefix hits {m.prefix_hits}/{m.prefix_lookups}, {m.prompt_tokens_saved} prompt tokens saved"
        f"{_restored_text(m)}{_drafts_text(m)}"
    ) + others


def _restored_text(m) -> str:
    """The disk prompt cache's share, once it restored something (none: no clutter)."""
    restored = getattr(m, "prompt_tokens_restored", 0)
    return f" ({restored} restored from disk)" if restored else ""


def _drafts_text(m) -> str:
    """Speculative decoding's share, once it drafted something."""
    drafted = getattr(m, "draft_tokens", 0)
    if not drafted:
        return ""
    kept = getattr(m, "draft_tokens_accepted", 0)
    return f" · drafts {kept}/{drafted} kept, {m.tokens_per_step:.1f} tokens a step"


def _gpu_text(hw) -> str:
    if hw is None:
        return ""
    if not hw.gpus:
        return hw.gpu_note or "No NVIDIA GPU"
    parts = []
    for g in hw.gpus:
        extra = [f"{g.temperature_c:.0f} °C" if g.temperature_c is not None else "",
                 f"{g.power_w:.0f} W" if g.power_w is not None else ""]
        parts.append(f"GPU {g.index} {g.name}: {g.utilization_pct:.0f}% · "
                     f"{g.memory_used_mib:.0f}/{g.memory_total_mib:.0f} MiB " + " ".join(e for e in extra if e))
    return "\n".join(parts)
