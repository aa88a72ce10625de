"""What the routes of one server share: the models it serves, its settings, the calls in flight.

Touched only on the server's event loop (one thread), so it needs no locks; the one
exception, the model's name, is a plain attribute swap the app makes from its worker."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from app.server.calls.engine_bridge import Choices
from app.server.calls.served import OneModel, ServedModels
from app.server.config import ServerConfig
from app.server.http.errors import ApiError
from app.server.responses_store import ResponseStore
from inference import EngineClient


class ServerState:
    def __init__(self, engine: EngineClient | None, config: ServerConfig, ready: Callable[[], bool],
                 models: ServedModels | None = None) -> None:
        """engine: the one engine of a single-model server; models: instead, the models a
        call picks from by name (a pool). One of the two."""
        if models is None:
            if engine is None:
                raise ValueError("a server needs an engine or the models it serves")
            models = OneModel(engine, lambda: self.config.model_id)
        self.engine = engine  # None when serving a pool
        self.models = models
        self.config = config
        self.ready = ready  # the model is loaded and the engine runs (/health)
        self.stopping = False
        self.generating = 0  # calls holding a concurrency slot
        self._calls: set[Choices] = set()
        self.responses = ResponseStore(config.responses_db, config.on_response_stored)  # /v1/responses with store

    @property
    def model_id(self) -> str:
        return self.config.model_id

    def rename(self, model_id: str) -> None:
        self.config = replace(self.config, model_id=model_id)

    def admit(self) -> Callable[[], None]:
        """A concurrency slot for one generation call, or 429 with Retry-After; returns
        what gives the slot back (once, however often it is called)."""
        cap = self.config.max_concurrent
        if self.generating >= cap:
            raise ApiError(429, f"this server runs at most {cap} requests at once; retry shortly",
                           headers={"Retry-After": str(self.config.retry_after_s)})
        self.generating += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                self.generating -= 1

        return release

    def track(self, choices: Choices) -> None:
        self._calls.add(choices)

    def forget(self, choices: Choices) -> None:
        self._calls.discard(choices)

    def stop_all(self) -> None:
        """On the loop, when the server stops: new calls get 503, open ones end."""
        self.stopping = True
        for choices in list(self._calls):
            choices.stop()
