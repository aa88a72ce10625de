"""The prompt library: read from the catalog at start, given to every chat's composer (for
"/" and a name), edited in Chat → Prompt library… and saved at each change."""

from __future__ import annotations

import asyncio

from app.chats.prompt_library import SETTING, SavedPrompt, dumped, loaded
from ui.services.context import ControllerContext
from ui.widgets.chat.prompt_library_dialog import PromptLibraryDialog


class PromptsController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.prompts: list[SavedPrompt] = []
        self.dialog: PromptLibraryDialog | None = None  # the one open, if any
        ctx.events.tab_opened.connect(lambda tab: self._give(tab))
        # A comparison opens without tab_opened: each view gets the library when it is shown.
        ctx.window.tabs.currentChanged.connect(lambda _i: self._give(ctx.window.tabs.currentWidget()))
        ctx.window.prompt_library_requested.connect(self.show_library)

    def start(self) -> asyncio.Task:
        catalog = self.ctx.catalog
        return self.ctx.storage.run(lambda: loaded(catalog.get_setting(SETTING, [])), self._loaded)

    def _loaded(self, prompts: list[SavedPrompt]) -> None:
        self.prompts = prompts
        for view in self._composers():
            self._give(view)

    def _give(self, view: object) -> None:
        box = getattr(view, "composer_box", None)
        if box is not None:
            box.set_saved_prompts(self.prompts)

    def _composers(self) -> list[object]:
        window = self.ctx.window
        return [*window.open_tabs(), *window.open_comparisons()]

    def show_library(self) -> None:
        if self.dialog is None:
            self.dialog = PromptLibraryDialog(self.prompts, self.ctx.window)
            self.dialog.changed.connect(self._changed)
            self.dialog.finished.connect(lambda _r: setattr(self, "dialog", None))
        self.dialog.show()
        self.dialog.raise_()

    def _changed(self, prompts: list[SavedPrompt]) -> asyncio.Task:
        self._loaded(prompts)
        catalog, value = self.ctx.catalog, dumped(prompts)
        return self.ctx.storage.run(lambda: catalog.set_setting(SETTING, value))
