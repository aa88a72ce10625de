"""Which model a call runs on: the one interface every route resolves its engine through
(calls/intake.py, once per call, from the body's `model`), with the server's two answers:

    OneModel          `chorus serve` as it always was, and the app's switch: one engine, whatever
                      `model` says (clients send all sorts of names), /v1/models lists it alone
    PooledModels      `chorus serve --models`: each name its own engine from the model pool,
                      loaded on demand (app/server/pooled_models.py)

A call holds its model (a pool never evicts it) from the target's opening to its release."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from app.server.metrics import Lane
from inference import EngineClient


def _nothing() -> None:
    pass


@dataclass(frozen=True)
class Target:
    """The model one API call runs on: the name its answer gives, its engine, and what ends
    the call's hold on it (once the call ends, however it ends)."""

    model_id: str
    engine: EngineClient
    release: Callable[[], None] = _nothing


class ServedModels(Protocol):
    async def open(self, body: dict) -> Target:
        """The model the request's body names (its `model`; `keep_alive` where models
        load and unload), loaded; an ApiError when it is unknown (404), cannot fit (400)
        or cannot load (503)."""
        ...

    def listing(self) -> list[dict[str, Any]]:
        """/v1/models' data: one object per model served."""
        ...

    def lanes(self) -> list[Lane]:
        """Each running engine's latest metrics (may wait for an engine's step)."""
        ...


class OneModel:
    """One engine serves every call; model_id: its name now (the app renames it when it
    loads another model)."""

    def __init__(self, engine: EngineClient, model_id: Callable[[], str]) -> None:
        self.engine = engine
        self._model_id = model_id

    async def open(self, body: dict) -> Target:
        return Target(self._model_id(), self.engine)

    def listing(self) -> list[dict[str, Any]]:
        """The served model, with its context length (OpenRouter's and LM Studio's name for
        it) once the engine has loaded it."""
        model: dict[str, Any] = {"id": self._model_id(), "object": "model", "created": 0, "owned_by": "chorus"}
        info = self.engine.info
        if info is not None and info.n_ctx > 0:
            model["context_length"] = info.n_ctx
        return [model]

    def lanes(self) -> list[Lane]:
        snapshot = self.engine.metrics()  # EngineError once the engine is down: the collector skips it
        return [] if snapshot is None else [(None, snapshot)]
