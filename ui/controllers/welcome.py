"""The welcome page's example prompts: a click opens a new chat and sends the prompt in it,
as if typed. The examples wait for a model that is ready (they would only queue otherwise)."""

from __future__ import annotations

from app.engines.protocol import EngineState, EngineStatus
from ui.services.context import ControllerContext
from ui.widgets.chat.chat_tab import ChatTab


class WelcomeController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.pending: str | None = None  # the prompt for the next new chat's tab
        ctx.window.example_requested.connect(self.start_example)
        ctx.events.tab_opened.connect(self._tab_opened)
        ctx.engine_signals.state_changed.connect(self._engine_state)
        ctx.window.welcome.set_examples_enabled(False)

    def _engine_state(self, state: EngineState) -> None:
        self.ctx.window.welcome.set_examples_enabled(state.status is EngineStatus.READY)

    def start_example(self, prompt: str) -> None:
        self.pending = prompt
        self.ctx.window.new_chat_requested.emit()

    def _tab_opened(self, tab) -> None:
        if self.pending is None or not isinstance(tab, ChatTab) or tab.title:
            return  # not the new, untitled chat the example asked for
        prompt, self.pending = self.pending, None
        # Posted, so that every other listener has wired the tab first. The order with the
        # tab's own first read does not matter: storage runs in order and the view merges
        # the live stream (ConversationActions.show_path).
        self.ctx.gui.post(lambda: tab.send_requested.emit(prompt, ()))
