"""The app's switch for the OpenAI-compatible server (off by default): it serves the app's
own main engine (the hub's MainEngine, an EngineClient), so HTTP clients share the batch
with the tabs.

start and stop block (binding resolves a name, stopping ends open streams): the app calls
them from a worker thread."""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.jobs import JobSlots
from app.server.config import ServerConfig
from app.server.uvicorn_server import HttpServer
from inference import EngineClient

log = logging.getLogger(__name__)


class ServerError(RuntimeError):
    pass


class AppServer:
    def __init__(self, engine: EngineClient, ready: Callable[[], bool] | None = None,
                 job_slots: JobSlots | None = None) -> None:
        """job_slots: the items in flight its batches share with the app's own jobs."""
        self.engine = engine
        self._job_slots = job_slots
        self._ready = ready  # whether the app's model is loaded (/health); None: ask the engine
        self._server: HttpServer | None = None

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
            server = HttpServer(self.engine, config, ready=self._ready, job_slots=self._job_slots)
        except OSError as exc:
            raise ServerError(f"cannot listen on {config.host}:{config.port}: {exc.strerror or exc}") from None
        self._server = server.start()
        url = f"{server.url}/v1"
        log.info("serving the app's engine at %s (%s)", url, "API key" if config.api_key else "no API key")
        return url

    def rename_model(self, model_id: str) -> None:
        """What /v1/models reports, after the app loaded another model."""
        if self._server is not None:
            self._server.rename_model(model_id)

    def model_changing(self) -> None:
        """The app is about to load another model (any thread, before the engine restarts):
        the server's batches pause, so that none of their answers comes from the new one."""
        if self._server is not None:
            self._server.model_changing()

    def model_settled(self, model_id: str) -> None:
        """The app's load ended: the server serves model_id, and batches of it run again."""
        if self._server is not None:
            self._server.model_settled(model_id)

    def stop(self) -> None:
        """Stop listening and end open requests and streams."""
        if self._server is None:
            return
        server, self._server = self._server, None
        server.stop()
