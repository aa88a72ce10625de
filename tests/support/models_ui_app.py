"""The window and its controllers on a data folder, with no engine started, for the Models
window's tests: the Hub at HF_ENDPOINT (the stand-in, tests/support/hub_standin.py, or a closed
port), the library in the data folder's database, the models in its models/ folder."""

from __future__ import annotations

from pathlib import Path

from inference import LoadSettings
from tests.support.window import Window

WAIT_MS = 30_000


class ModelsShell(Window):
    def __init__(self, qtbot, data_dir: Path, model_path: Path | None = None) -> None:
        """model_path: the main engine's model (never started here): a file the library may
        hold, so that deleting it is refused."""
        settings = LoadSettings(model_path=model_path or data_dir / "no-model.gguf", n_ctx=2048)
        super().__init__(qtbot, data_dir, settings, auto_titles=False)
        self.data_dir = data_dir
        self.models = self.controllers.models
        self.window.show()
        qtbot.waitExposed(self.window)

    @property
    def models_dir(self) -> Path:
        return self.ctx.models_dir

    def open(self):
        """File → Models…, as a user opens it; the window once it is on screen."""
        self.window.models_requested.emit()
        win = self.models.window
        self.qtbot.waitExposed(win)
        return win

    def library_names(self) -> list[str]:
        return self.models.window.library.names()

    def close(self) -> None:
        if self.models.window is not None:
            self.models.window.close()
        self.models.shutdown()
        self.controllers.engines.shutdown()  # one a test loaded through Load
        super().close()
