"""The window and its controllers on a data folder, without an engine: enough for the menus'
tests (theme, export and import, shortcuts), which need storage but no model."""

from __future__ import annotations

from pathlib import Path

from inference import LoadSettings
from tests.support.window import Window


class Shell(Window):
    def __init__(self, qtbot, data_dir: Path, theme: str | None = None) -> None:
        super().__init__(qtbot, data_dir, LoadSettings(model_path=data_dir / "no-model.gguf"), theme=theme,
                         auto_titles=False)
        self.window.show()
        qtbot.waitExposed(self.window)
        # What Controllers.start() does, less the engine
        self.controllers.conversations.refresh()
        self.controllers.theme.restore()
