"""View → Theme: the chosen theme applied live to everything on screen and kept in the
settings table for the next start; `chorus app --theme` wins for the run it starts."""

from __future__ import annotations

from concurrent.futures import Future

from PySide6.QtWidgets import QApplication

from ui.services.context import ControllerContext
from ui.theme import THEMES, apply_theme, current_theme

THEME_SETTING = "theme"


def _qapp() -> QApplication:
    app = QApplication.instance()
    if not isinstance(app, QApplication):
        raise RuntimeError("the theme needs the GUI's QApplication")
    return app


class ThemeController:
    def __init__(self, ctx: ControllerContext, override: str | None = None) -> None:
        self.ctx = ctx
        self.override = override  # from the command line: this run's theme, whatever was saved
        self.chosen = False  # the user picked one this run: a restore answering late must not undo it
        ctx.window.theme_requested.connect(self.choose)
        ctx.window.menus.set_theme(override or current_theme(_qapp()))

    def restore(self):
        """The saved theme, read on the storage thread (none saved: the one in force stays)."""
        if self.override:
            return None
        return self.ctx.storage.run(lambda: self.ctx.catalog.get_setting(THEME_SETTING), self._restored)

    def _restored(self, saved) -> None:
        if saved in THEMES and not self.chosen:
            self.apply(saved)

    def choose(self, name: str) -> Future:
        """The user picked a theme: shown at once, saved on the storage thread."""
        self.chosen = True
        self.apply(name)
        return self.ctx.storage.submit(self.ctx.catalog.set_setting, THEME_SETTING, name)

    def apply(self, name: str) -> None:
        # The application palette reaches every widget (bubbles and code blocks are painted
        # from it); the panel's plots keep colours given when built, so they are told.
        apply_theme(_qapp(), name)
        self.ctx.window.menus.set_theme(name)
        self.ctx.window.perf_panel.apply_theme()
