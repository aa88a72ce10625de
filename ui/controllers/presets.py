"""Presets (a system prompt and sampling settings under a name): the sidebar's list and the
preset editor."""

from __future__ import annotations

import asyncio

from ui.services.context import ControllerContext
from ui.widgets.settings.preset_editor import PresetEditor


class PresetsController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.editor: PresetEditor | None = None
        ctx.window.presets_requested.connect(self.edit_presets)

    def refresh(self) -> asyncio.Task:
        def shown(presets) -> None:
            self.ctx.window.set_presets([(p.id, p.name) for p in presets])
            if self.editor is not None:
                self.editor.set_presets(presets)

        return self.ctx.storage.run(self.ctx.catalog.list_presets, shown)

    def save_preset(self, preset_id: int | None, name: str, system_prompt: str, sampling: dict) -> asyncio.Task:
        catalog = self.ctx.catalog

        def work():
            if preset_id is None:
                return catalog.create_preset(name, system_prompt, sampling)
            return catalog.update_preset(preset_id, name=name, system_prompt=system_prompt, sampling=sampling)

        return self.ctx.storage.run(work, lambda _p: self.refresh())

    def delete_preset(self, preset_id: int) -> asyncio.Task:
        return self.ctx.storage.run(lambda: self.ctx.catalog.delete_preset(preset_id), lambda _n: self.refresh())

    def edit_presets(self) -> PresetEditor:
        if self.editor is None:
            self.editor = PresetEditor(self.ctx.window)
            self.editor.save_requested.connect(self.save_preset)
            self.editor.delete_requested.connect(self.delete_preset)
        self.refresh()
        self.editor.show()
        return self.editor
