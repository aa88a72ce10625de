"""The Discover tab's right half: one repository's GGUF files (size, quantization, whether it
fits this machine), the context the fit is judged for, and the download: progress with bytes
and speed, Cancel, and Load once it is installed. Widgets only: the controller fills in the
fit badges as its estimates arrive and runs the download."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont, QPalette
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ui.widgets.models.model_sizes import FIT_COLOURS, format_bytes

if TYPE_CHECKING:
    from app.models.fit import FitVerdict
    from app.models.hub import HubFile

COLUMNS = ("File", "Quant", "Size", "Fit")
NAME, QUANT, SIZE, FIT = range(len(COLUMNS))
ESTIMATING = "estimating…"
VISION_MARK = " · sees images (vision projectors)"  # a repository with mmproj files


class HubFiles(QWidget):
    download_requested = Signal(object)  # the HubFile chosen
    cancel_requested = Signal()
    load_requested = Signal(str)  # the installed file's path
    context_changed = Signal(int)  # fit badges are for this many tokens of context

    def __init__(self, n_ctx: int = 8192, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.files: dict[str, HubFile] = {}
        self.repo_id = ""
        self.installed_path = ""
        self.title = QLabel("Choose a repository to see its files")
        font = QFont(self.title.font())
        font.setBold(True)
        self.title.setFont(font)
        self.context = QSpinBox()
        self.context.setRange(512, 1_048_576)
        self.context.setSingleStep(1024)
        self.context.setValue(n_ctx)
        self.context.setSuffix(" tokens")
        self.context.setKeyboardTracking(False)  # one estimate per value, not per digit
        self.context.setToolTip("The context the memory estimate is for: weights plus its KV cache")
        self.list = QTreeWidget()
        self.list.setHeaderLabels(COLUMNS)
        self.list.setRootIsDecorated(False)
        self.list.setUniformRowHeights(True)
        self.list.setAlternatingRowColors(True)
        self.list.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # the quant is at the name's end
        header = self.list.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(NAME, QHeaderView.ResizeMode.Stretch)
        for column in (QUANT, SIZE, FIT):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.fit_reason = QLabel()
        self.fit_reason.setWordWrap(True)
        self.fit_reason.setForegroundRole(QPalette.ColorRole.PlaceholderText)
        self._download_row()
        self._layout()
        self.context.valueChanged.connect(self.context_changed)
        self.list.currentItemChanged.connect(lambda _item, _prev: self._selection_changed())
        self.download_button.clicked.connect(self._download_clicked)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.load_button.clicked.connect(lambda: self.load_requested.emit(self.installed_path))
        self.set_idle()
        self.hide_load()

    def _download_row(self) -> None:
        self.progress = QProgressBar()
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.setMaximumHeight(10)
        self.progress_label = QLabel()
        self.progress_label.setWordWrap(True)  # a long file name wraps; it never widens the window
        self.progress_label.setMinimumWidth(120)
        self.download_button = QPushButton("Download")
        self.cancel_button = QPushButton("Cancel")
        self.load_button = QPushButton("Load")

    def _layout(self) -> None:
        top = QHBoxLayout()
        top.addWidget(self.title, 1)
        top.addWidget(QLabel("Context:"))
        top.addWidget(self.context)
        buttons = QHBoxLayout()
        buttons.addWidget(self.progress_label, 1)
        buttons.addWidget(self.download_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.load_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.list, 1)
        layout.addWidget(self.fit_reason)
        layout.addWidget(self.progress)
        layout.addLayout(buttons)

    # ----- the files ----------------------------------------------------------------------

    def set_files(self, repo_id: str, files: Sequence[HubFile]) -> None:
        """A repository's files, each "estimating…" until its verdict comes."""
        self.repo_id = repo_id
        self.files = {f.name: f for f in files}
        vision = VISION_MARK if any(f.projector is not None for f in files) else ""
        self.title.setText(f"{repo_id} · {len(files)} GGUF file{'s' if len(files) != 1 else ''}{vision}"
                           if files else f"{repo_id} has no GGUF files")
        self.list.blockSignals(True)
        self.list.clear()
        for f in files:
            parts = f" ({len(f.parts)} parts)" if len(f.parts) > 1 else ""
            projector = " + vision projector" if f.projector is not None else ""
            item = QTreeWidgetItem([f.name + parts + projector, f.quant or "", format_bytes(f.download_bytes),
                                    ESTIMATING])
            item.setData(NAME, Qt.ItemDataRole.UserRole, f.name)
            item.setTextAlignment(SIZE, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            tip = [p.filename for p in f.parts]
            if f.projector is not None:
                tip.append(f"with vision projector {f.projector.name} ({format_bytes(f.projector.size_bytes)})")
            item.setToolTip(NAME, "\n".join(tip))
            self.list.addTopLevelItem(item)
        self.list.blockSignals(False)
        self._selection_changed()

    def clear_files(self, text: str = "Choose a repository to see its files") -> None:
        self.repo_id, self.files = "", {}
        self.title.setText(text)
        self.list.clear()
        self._selection_changed()

    def set_estimating(self) -> None:
        for item in self._items():
            item.setText(FIT, ESTIMATING)
            item.setForeground(FIT, QBrush())
            item.setToolTip(FIT, "")
        self._selection_changed()

    def set_verdict(self, name: str, verdict: FitVerdict | str) -> None:
        """A file's badge: a FitVerdict, or why there is none (one line)."""
        item = self._item(name)
        if item is None:
            return
        if isinstance(verdict, str):
            item.setText(FIT, "unknown")
            item.setForeground(FIT, QBrush())
            item.setToolTip(FIT, verdict)
        else:
            badge = verdict.fit.value
            item.setText(FIT, badge)
            item.setForeground(FIT, QBrush(QColor(FIT_COLOURS.get(badge, FIT_COLOURS["tight"]))))
            item.setToolTip(FIT, verdict.reason)
        if item is self.list.currentItem():
            self._selection_changed()

    def badge(self, name: str) -> str:
        item = self._item(name)
        return item.text(FIT) if item is not None else ""

    def select(self, name: str) -> None:
        item = self._item(name)
        if item is not None:
            self.list.setCurrentItem(item)

    def selected_file(self) -> HubFile | None:
        item = self.list.currentItem()
        return self.files.get(item.data(NAME, Qt.ItemDataRole.UserRole)) if item is not None else None

    def _items(self) -> list[QTreeWidgetItem]:
        return [self.list.topLevelItem(i) for i in range(self.list.topLevelItemCount())]

    def _item(self, name: str) -> QTreeWidgetItem | None:
        return next((i for i in self._items() if i.data(NAME, Qt.ItemDataRole.UserRole) == name), None)

    def _selection_changed(self) -> None:
        item = self.list.currentItem()
        reason = item.toolTip(FIT) if item is not None else ""
        text = (f"{item.text(FIT).capitalize()}: {reason}" if item is not None and reason
                else item.text(FIT).capitalize() if item is not None else "")
        chosen = self.selected_file()
        if chosen is not None and chosen.projector is not None:  # said before the download starts
            text += f" · with vision projector {chosen.projector.name}: the model sees images"
        self.fit_reason.setText(text)
        # isHidden, not isVisible: with the window closed a running download still counts
        self.download_button.setEnabled(item is not None and self.cancel_button.isHidden())

    def _download_clicked(self) -> None:
        chosen = self.selected_file()
        if chosen is not None:
            self.download_requested.emit(chosen)

    # ----- the download -------------------------------------------------------------------

    def set_idle(self, text: str = "") -> None:
        """No download running; text: how the last one ended, if it is worth saying."""
        self.progress.hide()
        self.cancel_button.hide()
        self.progress_label.setText(text)
        self._selection_changed()

    def set_downloading(self, filename: str, fraction: float | None, detail: str) -> None:
        self.progress.show()
        self.cancel_button.show()
        self.cancel_button.setEnabled(True)
        self.load_button.hide()
        if fraction is None:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(fraction * 1000))
        self.progress_label.setText(f"{filename}: {detail}")
        self.download_button.setEnabled(False)

    def set_installed(self, path: str, name: str, vision: str = "") -> None:
        """The download is in the library: Load offers it to the engine. vision: " with
        vision projector NAME" when one came with it."""
        self.installed_path = path
        self.set_idle(f"Installed {name}{vision}")
        self.load_button.setText(f"Load {name}")
        self.load_button.show()

    def hide_load(self) -> None:
        self.installed_path = ""
        self.load_button.hide()
