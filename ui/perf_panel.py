"""The live performance panel: what the engine and the machine are doing, over the last
minutes. It only draws: samples are pushed to it (PerfMonitor, off the GUI thread)."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QDockWidget, QGridLayout, QLabel, QVBoxLayout, QWidget

WINDOW_S = 300.0  # samples kept: the last five minutes
VIEW_S = 120.0  # shown: the last two minutes
STAGGER_MS = 25
PALETTE = ("#4c8bf5", "#e8710a", "#12b5cb", "#9334e6", "#188038", "#d93025")


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    series: tuple[str, ...]


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
        self._data: dict[str, deque[float]] = {s: deque() for c in CHARTS for s in c.series}
        self._curves: dict[str, pg.PlotDataItem] = {}
        self._plots: list[tuple[str, ...]] = [c.series for c in CHARTS]
        self.summary = QLabel("waiting for the engine…")
        self.summary.setWordWrap(True)
        self.gpu_label = QLabel("")
        body = QWidget()
        grid = QGridLayout()
        for i, chart in enumerate(CHARTS):
            grid.addWidget(self._plot(chart), i // 2, i % 2)
        box = QVBoxLayout(body)
        box.addWidget(self.summary)
        box.addWidget(self.gpu_label)
        box.addLayout(grid, 1)
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

    def add_sample(self, metrics, hardware, now: float | None = None) -> None:
        """One point per series. metrics: MetricsSnapshot or None (no engine yet)."""
        now = time.monotonic() if now is None else now
        values = _values(metrics, hardware)
        self._times.append(now)
        for name, series in self._data.items():
            series.append(values.get(name, float("nan")))
        while self._times and self._times[0] < now - WINDOW_S:
            self._times.popleft()
            for series in self._data.values():
                series.popleft()
        self._redraw(now)
        self.summary.setText(_summary(metrics))
        self.gpu_label.setText(_gpu_text(hardware))

    def series(self, name: str) -> list[float]:
        return list(self._data[name])

    def _redraw(self, now: float) -> None:
        if not self.isVisible():
            return  # nothing to draw for a hidden dock; the data keeps its window
        xs = [t - now for t in self._times]
        # One chart per slot, spread over the sample period, so the GUI thread never
        # spends one long stretch repainting all of them.
        for k, names in enumerate(self._plots):
            QTimer.singleShot(k * STAGGER_MS, lambda names=names: self._draw_chart(names, xs))

    def _draw_chart(self, names: tuple[str, ...], xs: list[float]) -> None:
        n = len(xs)
        for name in names:
            ys = list(self._data[name])[-n:]
            self._curves[name].setData(xs[-len(ys):], ys, skipFiniteCheck=True)


def _values(m, hw) -> dict[str, float]:
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
    if hw is not None:
        out["CPU %"] = hw.cpu_pct
        out["RAM MiB"] = hw.rss_mib
        if hw.gpus:
            out["GPU util %"] = sum(g.utilization_pct for g in hw.gpus) / len(hw.gpus)
            out["GPU mem %"] = 100.0 * sum(g.memory_used_mib for g in hw.gpus) / max(1.0, sum(g.memory_total_mib for g in hw.gpus))
    return out


def _summary(m) -> str:
    if m is None:
        return "waiting for the engine…"
    return (
        f"{m.decode_tok_s:.0f} tok/s decode · {m.prefill_tok_s:.0f} tok/s prefill · "
        f"batch {m.last_step_seqs} (max {m.max_step_seqs}) · {m.running} running · {m.queued} queued · "
        f"KV {m.kv_cells_used}/{m.kv_cells_total} cells, {m.kv_cells_shared} shared · "
        f"prefix hits {m.prefix_hits}/{m.prefix_lookups}, {m.prompt_tokens_saved} prompt tokens saved"
    )


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
