"""The desktop app driven like a user, for the GUI tests: a real window offscreen, its
controllers, and the real model in its own engine process."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from inference import LoadSettings, SamplingParams
from storage import MessageStatus
from tests.support.paths import ROOT
from tests.support.window import Window

SCREENSHOTS = Path(os.environ.get("CHORUS_SCREENSHOT_DIR", ROOT / "artifacts" / "screenshots"))
WAIT_MS = 120_000
ENDED = ("complete", "stopped", "interrupted", "error")  # a reply view no longer writing


@contextmanager
def chorus_server(engine, model_id: str, api_key: str) -> Iterator:
    """Chorus's own OpenAI-compatible server over an engine, on loopback: a remote source."""
    from app.server.config import ServerConfig
    from app.server.uvicorn_server import HttpServer

    server = HttpServer(engine, ServerConfig(port=0, api_key=api_key, model_id=model_id)).start()
    try:
        yield server
    finally:
        server.stop()


class App(Window):
    """A window, its controllers, and helpers to drive them like a user."""

    def __init__(self, qtbot, data_dir: Path, model_path: Path, max_tokens: int = 40, n_ctx: int = 4096,
                 auto_titles: bool = False, mmproj: Path | None = None) -> None:
        """mmproj: a vision projector the model loads with (as `chorus app --mmproj FILE`)."""
        sampling = SamplingParams(temperature=0.0, repeat_penalty=1.0, max_tokens=max_tokens, ignore_eos=True)
        settings = LoadSettings(model_path=model_path, n_ctx=n_ctx, n_seq_max=8, mmproj=mmproj)
        # Generated titles off unless a test asks: a title a test sets or sends stays as it is.
        super().__init__(qtbot, data_dir, settings, sampling=sampling, auto_titles=auto_titles)
        self.window.show()
        self.controllers.start()
        qtbot.waitUntil(lambda: self.controllers.engines.engine.state.status == "ready", timeout=WAIT_MS)

    def new_tab(self):
        before = self.window.tabs.count()
        self.controllers.conversations.new_chat()
        self.qtbot.waitUntil(lambda: self.window.tabs.count() == before + 1, timeout=10_000)
        return self.window.tabs.widget(before)

    def send(self, tab, text: str) -> None:
        tab.composer.setPlainText(text)
        tab.send_button.click()

    def last(self, tab):
        return tab.model.view(tab.model.rowCount() - 1)

    def wait_done(self, *tabs, timeout: int = WAIT_MS) -> None:
        self.qtbot.waitUntil(
            lambda: all(t.model.rowCount() >= 2 and self.last(t).status in ENDED
                        and not t.stop_button.isEnabled() for t in tabs),
            timeout=timeout,
        )

    def wait_streaming(self, *tabs) -> None:
        """Until every tab's reply is being written (background tabs draw it when shown)."""
        self.qtbot.waitUntil(
            lambda: all(t.state_label.text().startswith("writing") for t in tabs),
            timeout=WAIT_MS,
        )

    def stored_last(self, conversation_id: int, status: MessageStatus):
        """The last stored message once storage (written on its own thread) has it."""
        def last():
            return self.repo.active_path(conversation_id).messages[-1]

        self.qtbot.waitUntil(lambda: last().status is status, timeout=10_000)
        return last()

    def reply_twice(self, tab, text: str):
        """Send, then regenerate: returns the first reply's view (now on the other branch)."""
        self.send(tab, text)
        self.wait_done(tab)
        first = self.last(tab)
        tab.regenerate_button.click()
        self.qtbot.waitUntil(lambda: self.last(tab).key != first.key, timeout=10_000)
        self.wait_done(tab)
        return first

    def close(self) -> None:
        self.controllers.shutdown()
        self.db.close()
