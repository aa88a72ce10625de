"""The Discover tab's left half: a search box over the Hugging Face Hub and the repositories
found (id, architecture, downloads, likes, a "gated" badge). Widgets only: the search runs in
the controller, off the GUI thread; this says what was asked and shows what came back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QHeaderView, QLineEdit, QTreeWidget, QTreeWidgetItem, QVBoxLayout, QWidget

from ui.widgets.models.model_sizes import GATED_COLOUR, count_text

if TYPE_CHECKING:
    from app.models.hub import HubRepo

DEBOUNCE_MS = 400  # typing pauses this long before the search goes out (Enter: at once)
# Downloads and likes by their signs, as the Hub's own pages show them (the words in the
# header's tooltips): in a window on a small screen the words took the repository's room.
COLUMNS = ("Repository", "Architecture", "↓", "♥", "")
REPO, ARCH, DOWNLOADS, LIKES, ACCESS = range(len(COLUMNS))


class HubResults(QWidget):
    search_requested = Signal(str)
    repo_selected = Signal(str)  # a repository id

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.search_box = QLineEdit()
        self.search_box.setPlaceholderText("Search GGUF models on the Hugging Face Hub")
        self.search_box.setClearButtonEnabled(True)
        self.list = QTreeWidget()
        self.list.setHeaderLabels(COLUMNS)
        self.list.headerItem().setToolTip(DOWNLOADS, "Downloads")
        self.list.headerItem().setToolTip(LIKES, "Likes")
        self.list.setRootIsDecorated(False)
        self.list.setUniformRowHeights(True)
        self.list.setAlternatingRowColors(True)
        self.list.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # owner…model-GGUF: both ends say something
        header = self.list.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(REPO, QHeaderView.ResizeMode.Stretch)
        for column in (ARCH, DOWNLOADS, LIKES, ACCESS):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        self.setMinimumWidth(280)  # the repository ids stay readable however the splitter is dragged
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.search_box)
        layout.addWidget(self.list, 1)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(DEBOUNCE_MS)
        self._debounce.timeout.connect(self.search_now)
        self.search_box.textEdited.connect(lambda _text: self._debounce.start())
        self.search_box.returnPressed.connect(self.search_now)
        self.list.currentItemChanged.connect(self._current_changed)

    def query(self) -> str:
        return self.search_box.text().strip()

    def search_now(self) -> None:
        self._debounce.stop()
        self.search_requested.emit(self.query())

    def set_results(self, repos: Sequence[HubRepo]) -> None:
        self.list.blockSignals(True)  # a new list is not a choice of the user's
        self.list.clear()
        for repo in repos:
            self.list.addTopLevelItem(_row(repo))
        self.list.blockSignals(False)

    def repo_ids(self) -> list[str]:
        return [self.list.topLevelItem(i).text(REPO) for i in range(self.list.topLevelItemCount())]

    def select(self, repo_id: str) -> None:
        for i in range(self.list.topLevelItemCount()):
            item = self.list.topLevelItem(i)
            if item.text(REPO) == repo_id:
                self.list.setCurrentItem(item)  # emits repo_selected
                return

    def _current_changed(self, item: QTreeWidgetItem | None, _previous) -> None:
        if item is not None:
            self.repo_selected.emit(item.text(REPO))


def _row(repo: HubRepo) -> QTreeWidgetItem:
    arch = repo.architecture or ""
    if repo.sees_images:  # mmproj files in the repository: its models come with a vision projector
        arch = f"{arch} · sees images" if arch else "sees images"
    item = QTreeWidgetItem([repo.repo_id, arch, count_text(repo.downloads),
                            count_text(repo.likes), "gated" if repo.gated else ""])
    for column in (DOWNLOADS, LIKES):
        item.setTextAlignment(column, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    tip = [repo.repo_id, f"{repo.downloads:,} downloads, {repo.likes:,} likes"]
    if repo.context_length:
        tip.append(f"context length {repo.context_length:,} tokens")
    if repo.sees_images:
        tip.append("a vision model: it has vision projectors (mmproj), downloaded with the model")
    if repo.last_modified is not None:
        tip.append(f"updated {repo.last_modified:%Y-%m-%d}")
    if repo.gated:
        item.setForeground(ACCESS, QBrush(QColor(GATED_COLOUR)))
        tip.append("gated: accept its terms on the Hub, then set HF_TOKEN or run `hf auth login`")
    item.setToolTip(REPO, "\n".join(tip))
    item.setToolTip(ACCESS, tip[-1] if repo.gated else "")
    return item
