"""The right half of a split view: one chat beside the tab bar's, with its own composer.

The chat is a whole ChatTab, taken out of the tab bar while it is here and given back
(after the tab in front) when the split closes, so it sends and streams as any tab does.
Only chat tabs split: a comparison already shows its panes side by side."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from ui.widgets.chat_tab import ChatTab
from ui.widgets.chat_tabs import ChatTabs

SPLIT_TITLE_CHARS = 60


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
