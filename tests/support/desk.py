"""The window and its controllers on a chat database with the engine never started:
replies are fed to the window's stream presenter as the engine would send them (no model)."""

from __future__ import annotations

from types import SimpleNamespace

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest

from app.engines.protocol import EngineState, EngineStatus
from inference import LoadSettings
from inference.outputs import Delta, FinishReason, Phase
from tests.support.window import Window
from ui.services.stream_presenter import Stream


class Desk(Window):
    """The window and its controllers on a chat database, the engine never started."""

    def __init__(self, qtbot, data_dir) -> None:
        super().__init__(qtbot, data_dir, LoadSettings(model_path=data_dir / "none.gguf"))
        self.streams = self.ctx.streams
        self.window.resize(1200, 700)
        self.window.show()
        self.streams.start()
        self.controllers.background.start()
        self._requests = 0

    def chat(self, title: str):
        conv = self.repo.create_conversation(title=title)
        return self.window.open_tab(conv.id, title)

    def open_chat(self, title: str):
        """A new chat opened as the sidebar opens one: its tab wired by the controllers."""
        conv = self.repo.create_conversation(title=title)
        self.controllers.conversations.open_conversation(conv.id)
        self.qtbot.waitUntil(lambda: self.window.tab_for(conv.id) is not None)
        return self.window.tab_for(conv.id)

    def stream(self, conversation_id: int) -> Stream:
        self._requests += 1
        recorder = SimpleNamespace(on_delta=lambda delta: None, cite=None)  # nothing saved, no excerpts
        stream = Stream(f"r{self._requests}", conversation_id, message_id=self._requests, recorder=recorder)
        self.streams.add(stream)
        return stream

    def token(self, stream: Stream, text: str = "word ") -> None:
        self.streams.on_delta(Delta(stream.request_id, text=text, token_ids=(1,), phase=Phase.DECODING))

    def finish(self, stream: Stream, reason: FinishReason = FinishReason.STOP) -> None:
        error = "boom" if reason is FinishReason.ERROR else None
        self.streams.on_delta(Delta.finished_with(stream.request_id, reason, error=error))

    def write_for(self, stream: Stream, ms: int) -> None:
        """A token every frame for `ms`, as a reply streams."""
        for _ in range(ms // 20):
            self.token(stream)
            self.qtbot.wait(20)

    def close(self) -> None:
        self.streams.stop()
        self.controllers.background.stop()
        super().close()


class ScriptedEngine:
    """Takes the app's requests and writes nothing until told: `write` sends tokens, `end`
    the end; a cancel ends the reply as the engine does (stopped)."""

    is_local = True
    info = None  # no model file: the hub guesses token counts (as for an engine still loading)
    state = EngineState(EngineStatus.STARTING)

    def __init__(self, streams) -> None:
        self.streams = streams
        self.requests: list[str] = []
        self.chats: list = []  # the ChatRequests as the app made them
        self.sinks: dict[str, object] = {}  # each request's, as the app gave it
        self.template: str | None = None  # the chat template its model would render with (None: unknown)

    def stream(self, chat, sink) -> str:
        self.requests.append(chat.request_id)
        self.chats.append(chat)
        self.sinks[chat.request_id] = sink
        return chat.request_id

    def replies(self) -> list[str]:
        """The chats' requests: those for a chat's title left out (a first message asks for one)."""
        return [r for r in self.requests if not r.startswith("title-")]

    def cancel(self, request_id: str) -> None:
        self.end(request_id, FinishReason.CANCELLED)

    def set_priority(self, request_id: str, priority: int) -> None:
        pass

    def prepare(self, chat):
        return chat  # no tokenizer: as a server's engine, the chat goes as it is

    def write(self, request_id: str, text: str = "word ", tokens: int = 1) -> None:
        self._sink(request_id)(Delta(request_id, text=text, token_ids=(1,) * tokens, phase=Phase.DECODING))

    def end(self, request_id: str, reason: FinishReason = FinishReason.STOP) -> None:
        self._sink(request_id)(Delta.finished_with(request_id, reason))

    def _sink(self, request_id: str):
        return self.sinks.get(request_id, self.streams.on_delta)


def scripted_engine(desk: Desk) -> ScriptedEngine:
    """Every chat of the desk now replies through one ScriptedEngine."""
    engine = ScriptedEngine(desk.streams)
    desk.ctx.engines.engine_for = lambda conversation: engine
    desk.ctx.engines.chat_template = lambda asked: asked.template  # what EngineHub reads off a local model
    return engine


def as_remote(engine: ScriptedEngine) -> ScriptedEngine:
    """The scripted engine as a server's: no model info (the documents' tokens are guessed),
    and a documents' prefix pinned in it is forgotten."""
    engine.is_local = False
    engine.pin_system_prompt = lambda *args, **kwargs: None
    return engine


def open_tools_settings(desk: Desk):
    """Ctrl+, on the window, then a click on the Tools tab: the page."""
    qtbot = desk.qtbot
    desk.window.activateWindow()  # the shortcut is the active window's
    qtbot.waitUntil(desk.window.isActiveWindow)
    qtbot.keyClick(desk.window, Qt.Key.Key_Comma, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: desk.controllers.settings.window is not None
                    and desk.controllers.settings.window.isVisible())
    settings = desk.controllers.settings.window
    qtbot.waitExposed(settings)
    bar = settings.tabs.tabBar()
    QTest.mouseClick(bar, Qt.MouseButton.LeftButton, pos=bar.tabRect(1).center())
    qtbot.waitUntil(lambda: settings.tabs.currentWidget() is settings.tools)
    return settings.tools
