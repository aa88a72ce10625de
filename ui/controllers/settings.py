"""File → Settings: the app-wide chat defaults, read at start and saved on the storage
thread; new replies use them at once (a chat's own settings still win)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

from app.chats.defaults import DEFAULTS_SETTING, ChatDefaults
from ui.services.context import ControllerContext
from ui.widgets.settings_window import SettingsWindow


class SettingsController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.window: SettingsWindow | None = None
        ctx.window.settings_requested.connect(self.open)

    def restore(self) -> asyncio.Task:
        """The saved defaults (none saved: the built-in ones stay in force)."""
        return self.ctx.storage.run(lambda: self.ctx.catalog.get_setting(DEFAULTS_SETTING), self._restored)

    def _restored(self, saved) -> None:
        if saved is not None:
            self.apply(ChatDefaults.from_setting(saved))

    def open(self) -> SettingsWindow:
        if self.window is None:
            self.window = SettingsWindow(self.ctx.window)
            self.window.saved.connect(self.choose)
        self.window.show_defaults(self.ctx.chat_defaults)
        self.window.open()  # window-modal, no nested event loop
        return self.window

    def choose(self, defaults: ChatDefaults) -> Future:
        self.apply(defaults)
        return self.ctx.storage.submit(self.ctx.catalog.set_setting, DEFAULTS_SETTING, defaults.to_setting())

    def apply(self, defaults: ChatDefaults) -> None:
        self.ctx.chat_defaults = defaults
        self.ctx.sampling = defaults.sampling(self.ctx.sampling)
