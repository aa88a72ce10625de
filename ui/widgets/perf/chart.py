"""One chart of the performance panel: a title, a pyqtgraph plot with one unit on its left
axis and time on its bottom axis, and its legend under the plot (a label, never over the
curves). Built from a bare ViewBox and two axes rather than a PlotWidget: a PlotWidget also
builds its context menus and options dialog, which made it about three times as slow to
create on the GUI thread (the panel opens without a visible stall)."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

PLOT_MIN_H = 56
MIN_CHART_W = 260
CHART_H = 164  # title, plot and a legend of two lines: every chart asks for this size (see PerfPanel._place_charts)
CHART_MIN_H = 96  # in a short panel (a quarter of a 900x600 window) a row of charts still shows whole
# Fixed time ticks: the x range never changes, so the bottom axis is drawn once. No labels
# at the ends, where the axis would cut them off. Short ones: "90 s ago" ran into the next
# label in a chart under 300 px wide (three to a row in a 900 px window).
TIME_TICKS = [
    [(-90.0, "−90 s"), (-60.0, "−60 s"), (-30.0, "−30 s")],
    [(-120.0, ""), (0.0, "")],
]
LEGEND_GAP = "&nbsp; "  # between two legend entries on one line
LEGEND_GAP_TEXT = "  "  # the same, to measure
# Curve colours per theme: saturated on white, lighter tones on the dark background.
LIGHT_COLOURS = ("#1a73e8", "#e8710a", "#129eaf", "#9334e6", "#188038", "#d93025")
DARK_COLOURS = ("#8ab4f8", "#fcad70", "#78d9ec", "#c58af9", "#81c995", "#f28b82")


@dataclass(frozen=True)
class ChartSpec:
    key: str
    title: str
    unit: str  # the left axis's one unit
    series: tuple[tuple[str, str], ...]  # (series key, legend label)
    gpu: bool = False  # shown only when the machine reports an NVIDIA GPU
    y_max: float | None = None  # a fixed 0..y_max scale (a share in %), else it follows the data


def round_up(value: float) -> float:
    """1, 2, 2.5 or 5 times a power of ten, at least 5% over value (1 for nothing at all)."""
    if not value > 0 or math.isinf(value):
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    return next(m * power for m in (1, 2, 2.5, 5, 10, 20) if m * power >= value * 1.05)


def _number(value: float) -> str:
    """A tick's number, short: 2500 as "2.5k", 0.25 as "0.25"."""
    if value >= 1000:
        return f"{value / 1000:g}k"
    return f"{value:g}"


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Base).lightness() < 128


class PerfChart(QWidget):
    def __init__(self, spec: ChartSpec, view_s: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.spec = spec
        # The unit beside the title, not up the left axis: rotated there it was cut in a
        # short chart ("request", "tok/s (x0.00...", issue 39, defect 13).
        self.title = QLabel(f"<b>{html.escape(spec.title)}</b> · {html.escape(spec.unit)}")
        # One line, no word wrap: a wrapping label makes the charts' scroll area size them by
        # height-for-width, which stretched every row to several times its height.
        self.legend = QLabel()
        self.legend.setMinimumWidth(1)  # never widening its column: entries go onto more lines instead
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self._legend_entries: list[tuple[str, str]] = []  # (HTML, the plain text it shows)
        self.view = pg.GraphicsView()
        self.view.setMinimumHeight(PLOT_MIN_H)
        self.view.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        layout = pg.GraphicsLayout()
        layout.setContentsMargins(2, 9, 6, 2)  # room above the plot for its top number
        self.view.setCentralItem(layout)
        self.box = pg.ViewBox(enableMenu=False, enableMouse=False)
        self.left = pg.AxisItem("left")
        self.bottom = pg.AxisItem("bottom")
        for axis in (self.left, self.bottom):
            axis.linkToView(self.box)
        self.bottom.setTicks(TIME_TICKS)
        layout.addItem(self.left, 0, 0)
        layout.addItem(self.box, 0, 1)
        layout.addItem(self.bottom, 1, 1)
        self.box.setXRange(-view_s, 0, padding=0)
        # The y axis starts at 0 and ends at a round number over the data (fit_y): pyqtgraph's
        # own autorange centred an idle chart's zeros in -400..400 (issue 39, defect 13). A
        # share keeps its scale: 75% looks like three quarters, not like a flat line.
        self.box.enableAutoRange(x=False, y=False)
        self._top = float(spec.y_max * 1.02 if spec.y_max else 1.0)  # a full share's line clear of the edge
        self.box.setYRange(0, self._top, padding=0)
        self.left.enableAutoSIPrefix(False)  # never "(x0.001)" on the numbers
        self._tick_left()
        self.curves: dict[str, pg.PlotDataItem] = {}
        for key, _label in spec.series:
            curve = pg.PlotDataItem([], [])
            self.box.addItem(curve)
            self.curves[key] = curve
        box = QVBoxLayout(self)
        box.setContentsMargins(2, 0, 6, 8)
        box.setSpacing(0)
        box.addWidget(self.title)
        box.addWidget(self.view, 1)
        box.addWidget(self.legend)
        self.apply_theme()

    def fit_y(self, highest: float) -> None:
        """The y axis from 0 to a round number at or over the highest value shown."""
        if self.spec.y_max is not None:
            return
        top = round_up(highest)
        if top != self._top:
            self._top = top
            self.box.setYRange(0, top, padding=0)
            self._tick_left()

    def _tick_left(self) -> None:
        """0, the middle and the top: three numbers stay apart in a short chart, where
        pyqtgraph's own ticks ran into each other."""
        top = self.spec.y_max or self._top
        self.left.setTicks([[(v, _number(v)) for v in (0.0, top / 2, top)], []])

    def apply_theme(self, palette: QPalette | None = None) -> None:
        """Backgrounds, axes and curve colours from the palette (the chart's own by default)."""
        palette = self.palette() if palette is None else palette
        text = palette.color(QPalette.ColorRole.Text)
        self.view.setBackground(palette.color(QPalette.ColorRole.Base))
        for axis in (self.left, self.bottom):
            axis.setTextPen(text)
            axis.setPen(palette.color(QPalette.ColorRole.Mid))
        self.left.setLabel(self.spec.unit, color=text.name())
        self.left.showLabel(False)  # the title says the unit
        colours = DARK_COLOURS if is_dark(palette) else LIGHT_COLOURS
        self._legend_entries = []
        for colour, (key, label) in zip(colours, self.spec.series):
            dashed = "total" in key  # a ceiling, not a measure
            style = Qt.PenStyle.DashLine if dashed else Qt.PenStyle.SolidLine
            self.curves[key].setPen(pg.mkPen(colour, width=2, style=style))
            mark = "╍╍" if dashed else "━━"
            self._legend_entries.append(
                (f'<span style="color:{colour}">{mark}</span>&nbsp;{html.escape(label)}', f"{mark} {label}"))
        self._lay_out_legend()

    def _lay_out_legend(self) -> None:
        """The entries in as many lines as the chart's width needs, each entry whole (one
        line, it clipped the last one: "ITL p9"). Explicit line breaks, not word wrap: a
        wrapping label would size the charts by height-for-width (see __init__)."""
        metrics = self.legend.fontMetrics()
        room = max(1, self.width() - 8)  # the layout's margins
        gap = metrics.horizontalAdvance(LEGEND_GAP_TEXT)
        lines: list[list[str]] = [[]]
        used = 0
        for entry, plain in self._legend_entries:
            width = metrics.horizontalAdvance(plain)
            if lines[-1] and used + gap + width > room:
                lines.append([])
                used = 0
            used += (gap if lines[-1] else 0) + width
            lines[-1].append(entry)
        self.legend.setText("<br>".join(LEGEND_GAP.join(line) for line in lines))

    def resizeEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        if event.size().width() != event.oldSize().width():
            self._lay_out_legend()

    def sizeHint(self) -> QSize:
        return QSize(MIN_CHART_W, CHART_H)

    def changeEvent(self, event) -> None:
        super().changeEvent(event)
        # A theme switch reaches each widget's palette through posted events: re-read it
        # when this chart's own palette has changed, not when its parent's did.
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_theme()

    def legend_labels(self) -> list[str]:
        return [label for _key, label in self.spec.series]
