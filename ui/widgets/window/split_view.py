"""The right half of a split view: one chat beside the tab bar's, with its own composer.

The chat is a whole ChatTab, taken out of the tab bar while it is here and given back
(after the tab in front) when the split closes, so it sends and streams as any tab does.
Only chat tabs split: a comparison already shows its panes side by side."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QResizeEvent
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSplitter, QToolButton, QVBoxLayout, QWidget

from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.window.chat_tabs import ChatTabs

SPLIT_TITLE_CHARS = 60
RATIO_BOUNDS = (0.15, 0.85)  # a saved ratio from a damaged setting still shows both chats


class RatioSplitter(QSplitter):
    """The split view's divider, kept as a share of the width: where the user left it when
    the window resizes, and across a restart (the window's state saves `ratio`)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(Qt.Orientation.Horizontal, parent)
        self.ratio = 0.5
        self.splitterMoved.connect(self._moved)

    def set_ratio(self, ratio: float) -> None:
        self.ratio = min(RATIO_BOUNDS[1], max(RATIO_BOUNDS[0], ratio))
        self._apply()

    def _moved(self, _pos: int, _index: int) -> None:
        left, right = self.sizes()[:2]
        if left > 0 and right > 0:
            self.ratio = left / (left + right)

    def _apply(self) -> None:
        second = self.widget(1)
        if second is None or second.isHidden():
            return
        total = sum(self.sizes()[:2]) or self.width() - self.handleWidth()
        if total > 0:
            left = round(total * self.ratio)
            self.setSizes([left, total - left])

    def resizeEvent(self, event: QResizeEvent) -> None:  # noqa: N802 (Qt's name)
        super().resizeEvent(event)
        self._apply()


class SplitPane(QWidget):
    close_requested = Signal()  # the pane's × : the split ends, its chat goes back to the tabs

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("splitPane")
        self.tab: ChatTab | None = None
        self.title_label = QLabel()
        self.title_label.setObjectName("splitTitle")
        self.close_button = QToolButton()
        self.close_button.setText("×")
        self.close_button.setAutoRaise(True)
        self.close_button.setToolTip("Close the split: this chat goes back to the tabs")
        self.close_button.clicked.connect(self.close_requested)
        header = self.header = QWidget()
        header.setObjectName("splitHeader")
        row = QHBoxLayout(header)
        row.setContentsMargins(8, 2, 2, 2)
        row.addWidget(self.title_label, 1)
        row.addWidget(self.close_button)
        self._box = QVBoxLayout(self)
        self._box.setContentsMargins(0, 0, 0, 0)
        self._box.setSpacing(0)
        self._box.addWidget(header)
        self.hide()

    def hold(self, tab: ChatTab, header_h: int = 0) -> ChatTab | None:
        """Shows tab here, its title level with the tab bar's (header_h: the bar's height);
        returns the chat it replaces, if any (for the tab bar)."""
        if header_h > 0:
            self.header.setFixedHeight(header_h)
        previous = self.release()
        self.tab = tab
        self._box.addWidget(tab, 1)
        tab.show()
        self.set_title(tab.title)
        self.show()
        return previous

    def release(self) -> ChatTab | None:
        """Takes the chat out (the caller gives it a new home or deletes it)."""
        tab, self.tab = self.tab, None
        if tab is not None:
            self._box.removeWidget(tab)
            tab.setParent(None)
        self.hide()
        return tab

    def set_title(self, title: str) -> None:
        title = title or "New chat"
        short = title if len(title) <= SPLIT_TITLE_CHARS else title[: SPLIT_TITLE_CHARS - 1] + "…"
        self.title_label.setText(short)
        self.title_label.setToolTip(title)

    def set_active(self, active: bool) -> None:
        """The pane the keys go to is marked (the style sheet draws the header's accent)."""
        if self.header.property("active") != active:
            self.header.setProperty("active", active)
            self.header.style().unpolish(self.header)  # a property's rule applies once polished again
            self.header.style().polish(self.header)


def give_back(tabs: ChatTabs, tab: ChatTab, label: str) -> None:
    """The chat as a tab again, after the tab in front, and in front."""
    index = tabs.insertTab(tabs.currentIndex() + 1, tab, label)
    tabs.set_label(tab, label)
    tabs.setCurrentIndex(index)
