"""File → Serve over HTTP: the main engine behind the OpenAI-compatible server (off by
default); its requests join the tabs' batch."""

from __future__ import annotations

from pathlib import Path

from app.server.app_server import AppServer, ServerError
from app.server.openai_api import ServerConfig
from ui.controllers.context import ControllerContext


class ServerController:
    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.server = AppServer(ctx.engines.gateway)
        ctx.window.server_start_requested.connect(self.start_server)
        ctx.window.server_stop_requested.connect(self.stop_server)
        ctx.engines.state_changed.connect(lambda _state: self.server.rename_model(self._model_id()))

    def _model_id(self) -> str:
        return Path(self.ctx.engines.model_name).stem

    def start_server(self, host: str, port: int, api_key: str = "") -> str | None:
        window = self.ctx.window
        if not self.ctx.engines.is_local:
            window.show_error("Cannot serve", "Serving needs a local model (this window uses a remote server).")
            window.set_server_url(None)
            return None
        try:
            url = self.server.start(ServerConfig(host, port, api_key or None, self._model_id()))
        except ServerError as exc:
            window.show_error("Cannot serve", str(exc))
            window.set_server_url(None)
            return None
        window.set_server_url(url)
        return url

    def stop_server(self) -> None:
        self.server.stop()
        self.ctx.window.set_server_url(None)
