"""The window as the user left it: geometry and the open chats and comparisons, saved at
exit and restored at the next start."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from PySide6.QtCore import QByteArray

from ui.controllers.context import ControllerContext

WINDOW_SETTING = "window"


class WindowStateController:
    def __init__(self, ctx: ControllerContext, open_comparisons: Callable[[], list[int]]) -> None:
        self.ctx = ctx
        self._open_comparisons = open_comparisons

    def restore(self):
        return self.ctx.storage.run(self._saved, self._restore)

    def _saved(self) -> dict | None:
        """Read on the storage thread; tabs of conversations deleted since are dropped."""
        repo, catalog = self.ctx.repo, self.ctx.catalog
        saved = catalog.get_setting(WINDOW_SETTING)
        if saved:
            alive = {c.id for c in repo.list_conversations(include_archived=True)}
            saved["tabs"] = [i for i in saved.get("tabs", []) if i in alive]
            comparisons = {c.id for c in catalog.list_comparisons()}
            saved["comparisons"] = [i for i in saved.get("comparisons", []) if i in comparisons]
        return saved

    def _restore(self, saved: dict | None) -> None:
        if not saved:
            return
        window = self.ctx.window
        geometry = saved.get("geometry")
        if geometry:
            window.restoreGeometry(QByteArray.fromBase64(geometry.encode()))
        for conv_id in saved.get("tabs", []):
            window.open_requested.emit(conv_id)
        for comparison_id in saved.get("comparisons", []):
            window.open_comparison_requested.emit(comparison_id)

    def save(self) -> Future:
        window = self.ctx.window
        state = {
            "geometry": bytes(window.saveGeometry().toBase64()).decode(),
            "tabs": [t.conversation_id for t in window.open_tabs()],
            "comparisons": self._open_comparisons(),
        }
        return self.ctx.storage.submit(self.ctx.catalog.set_setting, WINDOW_SETTING, state)
