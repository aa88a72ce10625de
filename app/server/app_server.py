"""The app's switch for the OpenAI-compatible server (off by default): it serves the app's
own engine through an EngineGateway, so HTTP clients share the batch with the tabs."""

from __future__ import annotations

import logging
import threading
from dataclasses import replace

from app.engines.gateway import EngineGateway
from app.server.openai_api import ChorusHTTPServer, ServerConfig

log = logging.getLogger(__name__)


class ServerError(RuntimeError):
    pass


class AppServer:
    def __init__(self, gateway: EngineGateway) -> None:
        self.gateway = gateway
        self._server: ChorusHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def url(self) -> str | None:
        return f"{self._server.url}/v1" if self._server is not None else None

    def start(self, config: ServerConfig) -> str:
        """Listen (stopping a server already running); returns the base URL clients use."""
        self.stop()
        try:
            self._server = ChorusHTTPServer(self.gateway, config)
        except OSError as exc:
            raise ServerError(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}") from None
        self._thread = self._server.serve_in_thread()
        log.info("serving the app's engine at %s (%s)", self.url, "API key" if config.api_key else "no API key")
        return self.url

    def rename_model(self, model_id: str) -> None:
        """What /v1/models reports, after the app loaded another model."""
        if self._server is not None:
            self._server.config = replace(self._server.config, model_id=model_id)

    def stop(self) -> None:
        if self._server is None:
            return
        server, self._server = self._server, None
        server.close()
        if self._thread is not None:
            self._thread.join(5)
