"""The window as the user left it: geometry, the open chats and comparisons in their tab
order, and the tab in front; saved at exit and restored at the next start."""

from __future__ import annotations

from concurrent.futures import Future

from PySide6.QtCore import QByteArray

from ui.services.context import ControllerContext
from ui.widgets.compare_view import CompareView

WINDOW_SETTING = "window"
CHAT, COMPARISON = "chat", "comparison"


class WindowState:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx

    def restore(self):
        return self.ctx.storage.run(self._saved, self._restore)

    def _saved(self) -> dict | None:
        """Read on the storage thread; tabs of conversations deleted since are dropped."""
        repo, catalog = self.ctx.repo, self.ctx.catalog
        saved = catalog.get_setting(WINDOW_SETTING)
        if not saved:
            return None
        alive = {CHAT: {c.id for c in repo.list_conversations(include_archived=True)},
                 COMPARISON: {c.id for c in catalog.list_comparisons()}}
        saved["open"] = [(kind, ident) for kind, ident in _open_tabs(saved) if ident in alive.get(kind, ())]
        return saved

    def _restore(self, saved: dict | None) -> None:
        if not saved:
            return
        window = self.ctx.window
        geometry = saved.get("geometry")
        if geometry:
            window.restoreGeometry(QByteArray.fromBase64(geometry.encode()))
        for kind, ident in saved["open"]:  # each opens after one storage hop, in this order
            (window.open_requested if kind == CHAT else window.open_comparison_requested).emit(ident)
        current = saved.get("current")
        if current:  # after every tab above is open: the storage thread answers in order
            self.ctx.storage.run(lambda: None, lambda _none: self._select(*current))

    def _select(self, kind: str, ident: int) -> None:
        window = self.ctx.window
        tab = window.tab_for(ident) if kind == CHAT else window.compare_for(ident)
        if tab is not None:
            window.tabs.setCurrentWidget(tab)

    def save(self) -> Future:
        window = self.ctx.window
        tabs = [window.tabs.widget(i) for i in range(window.tabs.count())]
        current = window.tabs.currentWidget()
        state = {
            "geometry": bytes(window.saveGeometry().toBase64()).decode(),
            "open": [_tab_key(t) for t in tabs],  # in the tab bar's order
            "current": _tab_key(current) if current is not None else None,
        }
        return self.ctx.storage.submit(self.ctx.catalog.set_setting, WINDOW_SETTING, state)


def _tab_key(tab) -> tuple[str, int]:
    if isinstance(tab, CompareView):
        return COMPARISON, tab.comparison_id
    return CHAT, tab.conversation_id


def _open_tabs(saved: dict) -> list[tuple[str, int]]:
    """The saved tabs in order; a setting from before the order was kept lists chats, then
    comparisons."""
    if "open" in saved:
        return [(kind, int(ident)) for kind, ident in saved["open"]]
    return [(CHAT, i) for i in saved.get("tabs", [])] + [(COMPARISON, i) for i in saved.get("comparisons", [])]
