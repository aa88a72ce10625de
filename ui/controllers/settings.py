"""File → Settings: the app-wide chat defaults, read at start and saved on the storage
thread; new replies use them at once (a chat's own settings still win). Its Tools page
shows the MCP servers of ctx.tools as their states change (AppTools.changed), adds,
imports, removes and restarts them there, lists the tools that run without asking (Ask
again revokes one), and saves the tool loop's limits with Save."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import asdict

from app.chats.defaults import DEFAULTS_SETTING, ChatDefaults
from app.tools import ServerConfig
from ui.services.context import ControllerContext
from ui.services.mcp_tools import ToolSettings
from ui.widgets.settings.settings_window import SettingsWindow
from ui.widgets.tools.tools_settings import ToolsPage


class SettingsController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.window: SettingsWindow | None = None
        ctx.window.settings_requested.connect(self.open)
        ctx.tools.changed.connect(self._show_servers)

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
            self.window.limits_saved.connect(self.choose_limits)
            self._wire_tools(self.window.tools)
        self.window.show_defaults(self.ctx.chat_defaults)
        self.window.tools.show_limits(asdict(self.ctx.tools.settings), asdict(ToolSettings()))
        self._show_servers()
        self.window.open()  # window-modal, no nested event loop
        return self.window

    def choose(self, defaults: ChatDefaults) -> Future:
        self.apply(defaults)
        return self.ctx.storage.submit(self.ctx.catalog.set_setting, DEFAULTS_SETTING, defaults.to_setting())

    def apply(self, defaults: ChatDefaults) -> None:
        self.ctx.chat_defaults = defaults
        self.ctx.sampling = defaults.sampling(self.ctx.sampling)

    # ----- the Tools page ---------------------------------------------------------------------

    def _wire_tools(self, page: ToolsPage) -> None:
        tools = self.ctx.tools
        page.added.connect(tools.add)
        page.imported.connect(self.import_servers)
        page.remove_requested.connect(tools.remove)
        page.restart_requested.connect(tools.restart)  # its end comes back as changed
        page.revoke_requested.connect(tools.revoke_always)

    def import_servers(self, servers: Iterable[ServerConfig]) -> None:
        """The imported servers join those there; one of a name already there replaces it."""
        new = {s.name: s for s in servers}
        self.ctx.tools.set_servers([*(c for c in self.ctx.tools.configs() if c.name not in new), *new.values()])

    def choose_limits(self, values: dict[str, float]) -> None:
        limits = ToolSettings.from_setting(values)
        if limits != self.ctx.tools.settings:
            self.ctx.tools.set_settings(limits)

    def _show_servers(self) -> None:
        if self.window is None:
            return  # shown when the window opens
        tools = self.ctx.tools
        self.window.tools.show_servers([(config, tools.state(config.name)) for config in tools.configs()])
        self.window.tools.show_always(tools.allowed_always())
