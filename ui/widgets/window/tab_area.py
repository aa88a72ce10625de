"""The main window's chats: the tab bar of open chats and comparisons (the welcome page in its
place while none is open) and the split view's second chat beside it.

The area decides which chat is in front and which half the window's keys act on (the half
the user clicked or tabbed into), opens, closes, steps through and splits the tabs, and says
where a conversation is on screen. MainWindow delegates its tab moves here and passes the
signals on."""

from __future__ import annotations

from typing import cast

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QApplication, QStackedWidget, QVBoxLayout, QWidget

from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.compare.compare_view import ComparePane, CompareView
from ui.widgets.window.chat_tabs import ChatTabs
from ui.widgets.window.conversation_list import COMPARE_MARK
from ui.widgets.window.split_view import RatioSplitter, SplitPane, give_back


def tab_title(title: str) -> str:
    return title or "New chat"  # cut to the tab's width, at a word, by the bar (chat_tabs)


class TabArea(QWidget):
    tab_closed = Signal(int)  # a chat's tab or the split's chat closed: its conversation
    comparison_closed = Signal(int)
    split_changed = Signal()  # a chat went into the split view or out of it: both halves are on screen
    active_view_changed = Signal()  # the keys now go to the other half of the split
    new_chat_needed = Signal()  # Split right with one tab: the next chat opened goes into the split

    def __init__(self, welcome: QWidget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.welcome = welcome
        self.tabs = ChatTabs()  # marks on background tabs, readable with many tabs open
        self.tabs.splittable = lambda w: isinstance(w, ChatTab) and self.tabs.count() > 1
        self.tabs.split_requested.connect(self.open_in_split)
        self.tabs.tabCloseRequested.connect(self.close_tab)
        # The first tab added and the last one removed both change the current index.
        self.tabs.currentChanged.connect(self._show_welcome_or_tabs)
        self.split_pane = SplitPane()  # a second chat beside the tabs' (View → Split right)
        self.split_pane.close_requested.connect(self.close_split)
        self._split_active = False  # the keys go to the split's chat, not the tab bar's
        self._split_next = False  # the next new tab opens in the split (Split right with one tab)
        self.chat_stack = QStackedWidget()
        self.chat_stack.addWidget(welcome)
        self.chat_stack.addWidget(self.tabs)
        self.chat_split = RatioSplitter()
        self.chat_split.setChildrenCollapsible(False)
        self.chat_split.addWidget(self.chat_stack)
        self.chat_split.addWidget(self.split_pane)
        box = QVBoxLayout(self)
        box.setContentsMargins(0, 0, 0, 0)
        box.addWidget(self.chat_split)
        app = QApplication.instance()
        if isinstance(app, QApplication):
            app.focusChanged.connect(self._focus_moved)

    def _show_welcome_or_tabs(self) -> None:
        if not self.tabs.count() and self.split_pane.tab is not None:
            self.close_split()  # the split's chat alone beside the welcome page: a tab again
        self.chat_stack.setCurrentWidget(self.tabs if self.tabs.count() else self.welcome)

    # ----- where a conversation is ---------------------------------------------------------

    def open_tabs(self) -> list[ChatTab]:
        """Every chat tab, in the tab bar's order, then the split's."""
        widgets = (self.tabs.widget(i) for i in range(self.tabs.count()))
        split = [self.split_pane.tab] if self.split_pane.tab is not None else []
        return [w for w in widgets if isinstance(w, ChatTab)] + split

    def open_comparisons(self) -> list[CompareView]:
        widgets = (self.tabs.widget(i) for i in range(self.tabs.count()))
        return [w for w in widgets if isinstance(w, CompareView)]

    def tab_for(self, conversation_id: int) -> ChatTab | None:
        return next((t for t in self.open_tabs() if t.conversation_id == conversation_id), None)

    def compare_for(self, comparison_id: int) -> CompareView | None:
        return next((c for c in self.open_comparisons() if c.comparison_id == comparison_id), None)

    def view_for(self, conversation_id: int) -> ChatTab | ComparePane | None:
        """Where a conversation is on screen: its tab, or its pane in a compare view."""
        tab = self.tab_for(conversation_id)
        if tab is not None:
            return tab
        for compare in self.open_comparisons():
            pane = compare.pane_for(conversation_id)
            if pane is not None:
                return pane
        return None

    def is_showing(self, view: ChatTab | ComparePane) -> bool:
        return self.tabs.currentWidget() is _top(view) or view is self.split_pane.tab

    def current_tab(self) -> ChatTab | CompareView | None:
        """The chat the window's keys act on: the split's when the user is in it."""
        if self._split_active and self.split_pane.tab is not None:
            return self.split_pane.tab
        return cast("ChatTab | CompareView | None", self.tabs.currentWidget())  # the tab bar holds only these

    # ----- opening, closing, stepping --------------------------------------------------------

    def open_tab(self, conversation_id: int, title: str) -> ChatTab:
        tab = self.tab_for(conversation_id)
        if tab is None:
            tab = ChatTab(conversation_id, title)
            if self._split_next:
                self._split_next = False
                self.open_in_split(tab)
                return tab
            self.tabs.add(tab, tab_title(title))
        if tab is not self.split_pane.tab:
            self.tabs.setCurrentWidget(tab)
        tab.composer.setFocus()  # a new or reopened chat is for typing into
        return tab

    def open_compare(self, comparison_id: int, title: str) -> tuple[CompareView, bool]:
        """The comparison's view, and whether it was just made (then it has no panes yet)."""
        view = self.compare_for(comparison_id)
        made = view is None
        if view is None:
            view = CompareView(comparison_id, title)
            self.tabs.add(view, _label(view))
        self.tabs.setCurrentWidget(view)
        view.composer.setFocus()  # as a chat's tab: the next keys are the message to every pane
        return view, made

    def set_tab_title(self, tab: ChatTab | CompareView, title: str) -> None:
        tab.title = title
        self.tabs.set_label(tab, _label(tab))
        if tab is self.split_pane.tab:
            self.split_pane.set_title(title)

    def close_tab(self, index: int) -> None:
        """The tab bar's tab at index (its ×, its menu, Ctrl+W on it)."""
        tab = self.tabs.widget(index)
        if tab is None:
            return
        self.tabs.removeTab(index)
        if isinstance(tab, CompareView):
            self.comparison_closed.emit(tab.comparison_id)
        else:
            self.tab_closed.emit(cast(ChatTab, tab).conversation_id)
        tab.deleteLater()
        self.focus_composer()  # else Qt hands the focus to the next widget: the sidebar's search

    def close_tab_of(self, conversation_id: int) -> None:
        tab = self.tab_for(conversation_id)
        if tab is not None and tab is self.split_pane.tab:
            self._close_split_chat()
        elif tab is not None:
            self.close_tab(self.tabs.indexOf(tab))

    def close_current(self) -> None:
        if self._split_active and self.split_pane.tab is not None:
            self._close_split_chat()
        else:
            self.close_tab(self.tabs.currentIndex())

    def step_tab(self, step: int) -> None:
        if self.tabs.count():
            self.tabs.setCurrentIndex((self.tabs.currentIndex() + step) % self.tabs.count())

    def focus_composer(self) -> None:
        tab = self.current_tab()
        if tab is not None:
            tab.composer.setFocus()

    # ----- the split view: a second chat beside the tab bar's ------------------------------

    def split_tab(self) -> ChatTab | None:
        return self.split_pane.tab

    def open_in_split(self, tab: ChatTab, ratio: float = 0.5) -> None:
        """tab beside the tab bar's chat, for typing into; the chat the split held goes back
        to the bar. ratio: the tab bar's share of the width."""
        index = self.tabs.indexOf(tab)
        if index >= 0:
            self.tabs.removeTab(index)
        previous = self.split_pane.hold(tab, self.tabs.tabBar().height() if self.tabs.isVisible() else 0)
        if previous is not None:
            give_back(self.tabs, previous, _label(previous))
        self.chat_split.set_ratio(ratio)
        tab.composer.setFocus()
        self._split_shown(active=True)

    def close_split(self) -> None:
        """One chat again: the split's goes back to the tab bar, in front."""
        tab = self.split_pane.release()
        if tab is not None:
            give_back(self.tabs, tab, _label(tab))
            tab.composer.setFocus()
        self._split_shown(active=False)

    def split_right(self, on: bool) -> None:
        """The tab after the one in front (or before it) goes into the split; with one tab
        open, a new chat does (new_chat_needed asks for it)."""
        if not on:
            self.close_split()
            return
        current, count = self.tabs.currentIndex(), self.tabs.count()
        order = [(current + step) % count for step in range(1, count)] if count else []
        chat = next((w for w in map(self.tabs.widget, order) if isinstance(w, ChatTab)), None)
        if chat is not None:
            self.open_in_split(chat)
            return
        self._split_next = count > 0  # with no tab at all, the new chat is simply a tab
        self.new_chat_needed.emit()

    def _split_shown(self, active: bool) -> None:
        self._set_split_active(active and self.split_pane.tab is not None)
        self.split_changed.emit()

    def _focus_moved(self, _old: QWidget | None, new: QWidget | None) -> None:
        """The half the user clicks or tabs into is the one the window's keys act on."""
        if new is None or self.split_pane.tab is None:
            return
        if self.split_pane.isAncestorOf(new):
            self._set_split_active(True)
        elif self.chat_stack.isAncestorOf(new):
            self._set_split_active(False)

    def _set_split_active(self, active: bool) -> None:
        self.split_pane.set_active(active)
        if active != self._split_active:
            self._split_active = active
            self.active_view_changed.emit()

    def _close_split_chat(self) -> None:
        tab = self.split_pane.release()
        if tab is not None:
            self._split_shown(active=False)
            self.tab_closed.emit(tab.conversation_id)
            tab.deleteLater()
            self.focus_composer()


def _top(view: ChatTab | ComparePane) -> QWidget:
    """The widget in the tab bar that holds view."""
    return cast(CompareView, view.compare) if isinstance(view, ComparePane) else view  # a pane on screen is in a view


def _label(tab: ChatTab | CompareView) -> str:
    if isinstance(tab, CompareView):
        return COMPARE_MARK + tab_title(tab.title or "New comparison")
    return tab_title(tab.title)
