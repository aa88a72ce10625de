"""The window as the user left it: geometry, the open chats and comparisons in their tab
order, the tab in front, the chat of the split view, whether the sidebar is hidden, the
preset chosen for new chats, each chat tab's unread or failed mark and its draft (the text
typed in its composer but not sent, and the files attached to it, read again at the start);
saved at exit (and, a moment after the typing pauses, while a composer or its files change)
and restored at the next start."""

from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QByteArray, QTimer

from app.chats.draft_images import DRAFTS_FOLDER, keep_pasted
from storage import discard_unused
from ui.services.context import ControllerContext
from ui.widgets.chat.chat_tab import ChatTab
from ui.widgets.compare.compare_view import CompareView

WINDOW_SETTING = "window"
CHAT, COMPARISON = "chat", "comparison"
DRAFT_SAVE_MS = 500  # a composer's text is saved this long after the last key, not per key


class TabMarks(Protocol):
    """The tabs' unread and failed marks (the background controller holds them)."""

    def marks(self) -> dict[int, str]: ...

    def restore_marks(self, marks: dict[int, str]) -> None: ...


class WindowState:
    def __init__(self, ctx: ControllerContext, marks: TabMarks | None = None) -> None:
        self.ctx = ctx
        self.marks = marks
        self._restoring = False  # a save before every saved tab is back would drop the rest
        self._draft_timer = QTimer()
        self._draft_timer.setSingleShot(True)
        self._draft_timer.setInterval(DRAFT_SAVE_MS)
        self._draft_timer.timeout.connect(self._save_drafts)
        ctx.events.tab_opened.connect(self._watch)

    def _watch(self, tab: ChatTab) -> None:
        tab.composer.textChanged.connect(self._draft_timer.start)  # each key restarts the wait
        tab.composer_box.tray.changed.connect(self._draft_timer.start)  # a file attached or removed

    def _save_drafts(self) -> None:
        if not self._restoring:
            self.save()

    def stop(self) -> None:
        """No save pending: the storage thread is about to go."""
        self._draft_timer.stop()

    def restore(self):
        return self.ctx.storage.run(self._saved, self._restore)

    def _saved(self) -> dict | None:
        """Read on the storage thread; tabs of conversations deleted since are dropped, and
        so are the chats nothing was sent in but those with a draft (a tab left empty at
        the last quit, or before a crash)."""
        repo, catalog = self.ctx.repo, self.ctx.catalog
        saved = catalog.get_setting(WINDOW_SETTING)
        discard_unused(repo.db, keep=[int(draft[0]) for draft in (saved or {}).get("drafts", [])])
        if not saved:
            return None
        alive = {CHAT: {c.id for c in repo.list_conversations(include_archived=True, origin=None)},
                 COMPARISON: {c.id for c in catalog.list_comparisons()}}
        saved["open"] = [(kind, ident) for kind, ident in _open_tabs(saved) if ident in alive.get(kind, ())]
        return saved

    def _restore(self, saved: dict | None) -> None:
        if not saved:
            return
        self._restoring = True
        window = self.ctx.window
        geometry = saved.get("geometry")
        if geometry:
            window.restoreGeometry(QByteArray.fromBase64(geometry.encode()))
        for kind, ident in saved["open"]:  # each opens after one storage hop, in this order
            (window.open_requested if kind == CHAT else window.open_comparison_requested).emit(ident)
        self._select_preset(saved.get("preset"))
        window.menus.sidebar_action.setChecked(saved.get("sidebar", True))
        # After every tab above is open: the storage thread answers in order.
        self.ctx.storage.run(lambda: None, lambda _none: self._reopened(saved))

    def _reopened(self, saved: dict) -> None:
        """Every saved tab is open: the one in front, the composers' text, the marks."""
        current = saved.get("current")
        if current:
            self._select(*current)
        split = self.ctx.window.tab_for(int(saved.get("split") or 0))
        if split is not None and self.ctx.window.tabs.count() > 1:  # never the bar's last tab
            self.ctx.window.open_in_split(split, float(saved.get("split_ratio") or 0.5))
        for ident, text, *files in saved.get("drafts", []):  # files: since issue 39
            tab = self.ctx.window.tab_for(int(ident))
            if tab is not None:
                tab.restore_draft(text, [Path(p) for p in (files[0] if files else [])])
        if self.marks is not None:  # after the tab in front is chosen: its tab has been seen
            self.marks.restore_marks({int(ident): name for ident, name in saved.get("marks", [])})
        self._restoring = False

    def _select(self, kind: str, ident: int) -> None:
        window = self.ctx.window
        tab = window.tab_for(ident) if kind == CHAT else window.compare_for(ident)
        if tab is not None:
            window.tabs.setCurrentWidget(tab)

    def _select_preset(self, preset_id: int | None) -> None:
        """The presets were listed before this was read (the storage thread keeps the order);
        a preset deleted since leaves 'No preset'."""
        box = self.ctx.window.preset_box
        index = box.findData(preset_id) if preset_id is not None else -1
        if index >= 0:
            box.setCurrentIndex(index)

    def save(self) -> Future:
        self.stop()  # this save has the composers' text too
        window = self.ctx.window
        split = window.split_tab()
        tabs = [window.tabs.widget(i) for i in range(window.tabs.count())] + ([split] if split else [])
        current = window.tabs.currentWidget()
        marks = self.marks.marks() if self.marks is not None else {}
        chats = [t for t in tabs if isinstance(t, ChatTab)]
        pasted = {t.conversation_id: t.unsent_pasted_images() for t in chats}  # no file of their own
        state = {
            "geometry": bytes(window.saveGeometry().toBase64()).decode(),
            "open": [_tab_key(t) for t in tabs],  # in the tab bar's order
            "current": _tab_key(current) if current is not None else None,
            "preset": window.selected_preset(),
            "split": split.conversation_id if split is not None else None,  # reopened last, then split
            "split_ratio": window.chat_split.ratio,  # where the user left the divider
            "sidebar": window.menus.sidebar_action.isChecked(),
            # JSON keys are strings: lists keep the conversation ids ints.
            "drafts": [[t.conversation_id, t.unsent_text(), [str(p) for p in t.unsent_files()]] for t in chats
                       if t.unsent_text() or t.unsent_files() or pasted[t.conversation_id]],
            "marks": [[ident, name] for ident, name in marks.items()],
        }
        folder = Path(self.ctx.repo.db.path).parent / DRAFTS_FOLDER

        def write() -> None:  # on the storage thread: the images' files, then the setting naming them
            referenced = [Path(p) for draft in state["drafts"] for p in draft[2]]
            kept = keep_pasted(folder, pasted, referenced)
            for draft in state["drafts"]:
                draft[2] += [str(p) for p in kept.get(draft[0], [])]
            self.ctx.catalog.set_setting(WINDOW_SETTING, state)

        return self.ctx.storage.submit(write)


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
