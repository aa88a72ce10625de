"""The tab bar of open chats and comparisons: readable with many tabs open (a minimum width
per tab, scroll buttons rather than squeezed tabs, and a corner button listing every tab),
and a mark on background tabs saying what they do (see tab_activity).

A title longer than a tab is cut at the end of a word ("List three tips for…", never
"List three tips for learnin…"): the bar does the cutting, not Qt, whose elision cuts
mid-word, so Qt is told to elide nothing and to scroll instead of squeezing.

Each tab keeps its plain label and its activity in the tab bar's data, so they move with
the tab when it is dragged; the text is rebuilt only when the mark changes, since a new
text lays the whole bar out again. Tooltips change freely: they cost no layout."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, QSize, Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QTabBar, QTabWidget, QToolButton, QWidget

from ui.widgets.common.words import elided_at_a_word
from ui.widgets.window.tab_activity import MARKS, READY, Activity, tooltip

MIN_TAB_W = 140  # a title's first words (10 characters or more) stay readable however many tabs are open
TITLE_ROOM = 200  # pixels of a tab's text: a title cut to it keeps a tab under about 250


class ChatTabBar(QTabBar):
    def tabSizeHint(self, index: int) -> QSize:  # noqa: N802 (Qt's name)
        hint = super().tabSizeHint(index)
        return QSize(max(hint.width(), MIN_TAB_W), hint.height())

    def minimumTabSizeHint(self, index: int) -> QSize:  # noqa: N802 (Qt's name)
        # Qt squeezes tabs down to this before it shows the scroll buttons: not at all.
        return self.tabSizeHint(index)


class ChatTabs(QTabWidget):
    split_requested = Signal(QWidget)  # a tab's context menu: show it in the split view

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.splittable: Callable[[QWidget], bool] = lambda _widget: False  # the window says which
        self.setTabBar(ChatTabBar(self))
        self.setTabsClosable(True)
        self.setMovable(True)
        self.setDocumentMode(True)
        self.setElideMode(Qt.TextElideMode.ElideNone)  # the bar cuts titles itself, at a word
        self.setUsesScrollButtons(True)
        self.list_button = QToolButton(self)
        self.list_button.setText("▾")
        self.list_button.setAutoRaise(True)
        self.list_button.setToolTip("All open tabs")
        self.list_button.setAccessibleName("All open tabs")  # its text is the glyph ▾
        # clicked + popup(), not setMenu(): a tool button's menu runs a nested event loop
        self.list_button.clicked.connect(self._show_list)
        self.setCornerWidget(self.list_button, Qt.Corner.TopRightCorner)
        self.currentChanged.connect(self._marks_follow_current)
        self.tabBar().setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.tabBar().customContextMenuRequested.connect(self._show_tab_menu)

    # ----- labels and marks ----------------------------------------------------------------

    def add(self, widget: QWidget, label: str) -> int:
        index = self.addTab(widget, label)
        self.set_label(widget, label)
        return index

    def set_label(self, widget: QWidget, label: str) -> None:
        index = self.indexOf(widget)
        if index >= 0:
            self.tabBar().setTabData(index, (label, self.activity(widget)))
            self._render(index)

    def show_activity(self, widget: QWidget, activity: Activity) -> None:
        index = self.indexOf(widget)
        if index >= 0:
            self.tabBar().setTabData(index, (self.label(widget), activity))
            self._render(index)

    def label(self, widget: QWidget) -> str:
        data = self.tabBar().tabData(self.indexOf(widget))
        return data[0] if data else ""

    def activity(self, widget: QWidget) -> Activity:
        data = self.tabBar().tabData(self.indexOf(widget))
        return data[1] if data else READY

    def _render(self, index: int) -> None:
        label, activity = self.tabBar().tabData(index) or ("", READY)
        mark = "" if index == self.currentIndex() else MARKS[activity.state]  # the tab in front shows it all
        text = elided_at_a_word(self.tabBar().fontMetrics(), mark + label, TITLE_ROOM)
        if self.tabText(index) != text:
            self.setTabText(index, text)
        title = getattr(self.widget(index), "title", "") or label
        self.setTabToolTip(index, tooltip(title, activity))
        close = self.tabBar().tabButton(index, QTabBar.ButtonPosition.RightSide)
        if close is not None:  # Qt's own button, nameless to a screen reader
            close.setAccessibleName(f"Close {label}")

    def _marks_follow_current(self, _index: int) -> None:
        for index in range(self.count()):
            self._render(index)

    # ----- the list of every tab -----------------------------------------------------------

    def tab_list_menu(self) -> QMenu:
        """Every open tab, the current one in bold (no checkboxes: it is a list to go to, not
        options to tick); choosing one shows it."""
        menu = QMenu(self)
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        for index in range(self.count()):
            label, activity = self.tabBar().tabData(index) or ("", READY)
            title = getattr(self.widget(index), "title", "") or label  # whole, where the tab elides it
            action = QAction((MARKS[activity.state] + title).replace("&", "&&"), menu)
            if index == self.currentIndex():
                font = action.font()
                font.setBold(True)
                action.setFont(font)
                menu.setActiveAction(action)
            action.setToolTip(self.tabToolTip(index))
            widget = self.widget(index)
            action.triggered.connect(lambda _checked=False, w=widget: self.setCurrentWidget(w))
            menu.addAction(action)
        return menu

    def _show_list(self) -> None:
        menu = self.tab_list_menu()
        menu.popup(self.list_button.mapToGlobal(QPoint(0, self.list_button.height())))

    # ----- a tab's context menu ------------------------------------------------------------

    def tab_menu(self, index: int) -> QMenu:
        """Open in split (chats only), Close."""
        menu = QMenu(self)
        menu.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        widget = self.widget(index)
        assert widget is not None  # a tab under the mouse
        split = menu.addAction("Open in split")
        split.setEnabled(self.splittable(widget))
        split.triggered.connect(lambda _checked=False: self.split_requested.emit(widget))
        close = menu.addAction("Close tab")
        close.triggered.connect(lambda _checked=False: self.tabCloseRequested.emit(self.indexOf(widget)))
        return menu

    def _show_tab_menu(self, pos: QPoint) -> None:
        index = self.tabBar().tabAt(pos)
        if index >= 0:
            self.tab_menu(index).popup(self.tabBar().mapToGlobal(pos))  # popup(): no nested loop
