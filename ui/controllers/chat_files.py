"""File → Export… and Import…: chats written to and read from files in the CLI's formats
(app/chats/export_import.py), on the storage thread. A file that cannot be imported is said
plainly in the window and writes nothing."""

from __future__ import annotations

import asyncio

from app.chats.export_import import export_text, import_chats, write_whole
from storage import StorageError
from ui.services.context import ControllerContext
from ui.widgets.compare.compare_view import CompareView


class TransferController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        ctx.window.export_requested.connect(self.export)
        ctx.window.import_requested.connect(self.import_file)

    def export(self, path: str, fmt: str, every: bool) -> asyncio.Task | None:
        """Every chat, or the current tab's chat (a compare tab: its comparison)."""
        window, repo = self.ctx.window, self.ctx.repo
        tab = window.current_tab()
        conv_ids: list[int] | None = None
        comparison = None
        if not every:
            if tab is None:
                return None
            if isinstance(tab, CompareView):
                comparison = tab.comparison_id
            else:
                conv_ids = [tab.conversation_id]

        def work() -> tuple[int, str | None]:
            try:
                text, ids = export_text(repo.db, repo, fmt, conv_ids, comparison)
                write_whole(path, text)
            except (StorageError, OSError) as exc:  # not found, damaged, locked too long
                return 0, str(exc)
            return len(ids), None

        def done(result: tuple[int, str | None]) -> None:
            count, error = result
            if error is not None:
                window.show_error("Could not export", error)
            else:
                window.statusBar().showMessage(f"Exported {count} chat{'' if count == 1 else 's'} to {path}", 8000)

        return self.ctx.storage.run(work, done)

    def import_file(self, path: str) -> asyncio.Task:
        def work():
            try:
                return import_chats(self.ctx.repo.db, path), None
            except (StorageError, OSError) as exc:  # refused, damaged, locked too long
                return None, str(exc)

        def done(answer) -> None:
            result, error = answer
            if error is not None:
                self.ctx.window.show_error("Could not import", error)
                return
            count = len(result.conversation_ids)
            self.ctx.events.conversations_changed.emit()
            self.ctx.window.statusBar().showMessage(
                f"Imported {count} chat{'' if count == 1 else 's'}, {result.messages} messages", 8000)

        return self.ctx.storage.run(work, done)
