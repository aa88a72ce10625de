"""The live performance panel: what the engine and the machine are doing, over the last
minutes. It only draws: samples are pushed to it (PerfMonitor, off the GUI thread)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import (
    QApplication,
    QComboBox,
    QDockWidget,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QVBoxLayout,
    QWidget,
)

WINDOW_S = 300.0  # samples kept: the last five minutes
VIEW_S = 120.0  # shown: the last two minutes
STAGGER_MS = 25
PALETTE = ("#4c8bf5", "#e8710a", "#12b5cb", "#9334e6", "#188038", "#d93025")

CHART_COLUMNS = 4  # docked at the bottom: two rows of four
MIN_CHARTS_HEIGHT = 120


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    series: tuple[str, ...]


HARDWARE_SERIES = ("CPU %", "RAM MiB", "GPU util %", "GPU mem %")
CHARTS = (
    Chart("Tokens per second", "tok/s", ("prefill tok/s", "decode tok/s")),
    Chart("Batch", "per step", ("sequences", "tokens")),
    Chart("Requests", "", ("running", "queued")),
    Chart("KV cache", "cells", ("cells used", "cells shared", "cells total")),
    Chart("Prefix cache", "%", ("hit rate %",)),
    Chart("Latency", "ms", ("TTFT p50", "TTFT p95", "ITL p50", "ITL p95")),
    Chart("This process", "", ("CPU %", "RAM MiB")),
    Chart("GPU", "%", ("GPU util %", "GPU mem %")),
)


class PerfPanel(QDockWidget):
    def __init__(self, parent=None) -> None:
        super().__init__("Performance", parent)
        self.setObjectName("performancePanel")
        self._t0 = time.monotonic()
        self._times: deque[float] = deque()
        # Series per engine (by its model's name), and the machine's under "".
        self._data: dict[str, dict[str, deque[float]]] = {}
        self._latest: dict[str, object] = {}
        self.engine_box = QComboBox()
        self.engine_box.setToolTip("The engine the charts show, when several models are loaded")
        self.engine_box.currentIndexChanged.connect(lambda _i: self._redraw(self._times[-1] if self._times else 0.0))
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._plots: list[tuple[str, ...]] = [c.series for c in CHARTS]
        self.summary = QLabel("waiting for the engine…")
        self.summary.setWordWrap(True)
        self.gpu_label = QLabel("")
        body = QWidget()
        charts = QWidget()
        grid = QGridLayout(charts)
        grid.setContentsMargins(0, 0, 0, 0)
        for i, chart in enumerate(CHARTS):
            grid.addWidget(self._plot(chart), i // CHART_COLUMNS, i % CHART_COLUMNS)
        # The charts scroll inside the dock: opening the panel takes room from the chat down
        # to a usable size and never grows the window (their full height is ~300 px).
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(charts)
        scroll.setMinimumHeight(MIN_CHARTS_HEIGHT)
        box = QVBoxLayout(body)
        top = QHBoxLayout()
        top.addWidget(QLabel("Engine:"))
        top.addWidget(self.engine_box, 1)
        box.addLayout(top)
        box.addWidget(self.summary)
        box.addWidget(self.gpu_label)
        box.addWidget(scroll, 1)
        self.setWidget(body)
        self.setAllowedAreas(Qt.DockWidgetArea.BottomDockWidgetArea | Qt.DockWidgetArea.RightDockWidgetArea)

    def _plot(self, chart: Chart) -> pg.PlotWidget:
        palette = self.palette()
        plot = pg.PlotWidget()
        plot.setBackground(palette.color(QPalette.ColorRole.Base))
        text = palette.color(QPalette.ColorRole.Text)
        plot.setTitle(chart.title, color=text.name(), size="9pt")
        for axis in ("left", "bottom"):
            plot.getAxis(axis).setTextPen(text)
        plot.setMinimumHeight(120)
        # A fixed x range keeps the axes' cached drawing valid while the curves scroll;
        # grid lines are left out for the same reason (they are drawn by the axes).
        plot.setXRange(-VIEW_S, 0, padding=0)
        plot.enableAutoRange(x=False, y=True)
        plot.setLabel("bottom", "seconds ago")
        plot.hideButtons()
        plot.setMenuEnabled(False)
        plot.addLegend(offset=(4, 4), labelTextSize="7pt")
        plot.setMouseEnabled(x=False, y=False)
        for color, name in zip(PALETTE, chart.series):
            dashed = name.endswith("total")
            pen = pg.mkPen(color, width=2, style=Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine)
            self._curves[name] = plot.plot([], [], pen=pen, name=name)
        return plot

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
        self._redraw(now)
        self.summary.setText(_summary(self._latest.get(self.engine()), engines, self._latest))
        self.gpu_label.setText(_gpu_text(hardware))

    def _append(self, engine: str, values: dict[str, float]) -> None:
        names = HARDWARE_SERIES if engine == "" else [s for c in CHARTS for s in c.series if s not in HARDWARE_SERIES]
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
        for k, names in enumerate(self._plots):
            # With the panel as context, a pending draw dies with the panel.
            QTimer.singleShot(k * STAGGER_MS, self, lambda names=names: self._draw_chart(names, xs))

    def _draw_chart(self, names: tuple[str, ...], xs: list[float]) -> None:
        n = len(xs)
        for name in names:
            ys = self.series(name)[-n:]
            self._curves[name].setData(xs[-len(ys):], ys, skipFiniteCheck=True)

    def apply_theme(self) -> None:
        """The plots take the palette's colours again (View → Theme changed it live): their
        background and text are set when built, not read from the palette as they paint.
        The application's palette: the panel's own gets the change a moment later."""
        palette = QApplication.palette(self)
        text = palette.color(QPalette.ColorRole.Text)
        for plot in self.findChildren(pg.PlotWidget):
            plot.setBackground(palette.color(QPalette.ColorRole.Base))
            item = plot.getPlotItem()
            item.setTitle(item.titleLabel.text, color=text.name(), size="9pt")
            for axis in ("left", "bottom"):
                plot.getAxis(axis).setTextPen(text)


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
        if hw.gpus:
            out["GPU util %"] = sum(g.utilization_pct for g in hw.gpus) / len(hw.gpus)
            total = max(1.0, sum(g.memory_total_mib for g in hw.gpus))
            out["GPU mem %"] = 100.0 * sum(g.memory_used_mib for g in hw.gpus) / total
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
    ) + others


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
