"""The server's models when it serves several (`chorus serve --models`): each call's `model`
names one of the model pool's (app/engines/model_pool.py), loaded on demand; the call holds
it (never evicted) until it ends. What the pool refuses is an API error:

    a name not served       404, OpenAI's model_not_found, listing the names served
    larger than the budget  400, model_too_large, naming the budget
    its load failed         503 with the load's error (every call that waited for it)"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from app.engines.model_pool import ModelPool, ModelState, ModelTooLarge, PoolError, UnknownModel
from app.server.calls.parsing import keep_alive_of, model_of
from app.server.calls.served import Target
from app.server.http.errors import ApiError
from app.server.metrics import Lane
from inference import EngineError, LoadSettings
from inference.gguf import GgufHeader


@dataclass(frozen=True)
class ModelCard:
    """What /v1/models says of a model before it loads (read from its file and settings at
    start; a loaded model's own context length replaces context_length)."""

    context_length: int
    vision: bool  # loaded with a vision projector: its chats may show images
    native_tools: bool  # its chat template has a tool format of its own (else tools go in the prompt)


def model_card(settings: LoadSettings, header: GgufHeader) -> ModelCard:
    """The card of a model loaded with settings, from its file's header (no load)."""
    from inference import template_supports_tools  # Jinja only, no llama.cpp

    template = settings.chat_template or header.metadata.get("tokenizer.chat_template")
    native = isinstance(template, str) and template_supports_tools(template)
    return ModelCard(context_length=settings.n_ctx, vision=settings.mmproj is not None, native_tools=native)


class PooledModels:
    def __init__(self, pool: ModelPool, default: str, cards: dict[str, ModelCard] | None = None,
                 aliases: dict[str, str] | None = None) -> None:
        """default: the model of a call that names none; aliases: other names a call may
        use for a model (its file's stem, the name a single-model server gave it)."""
        if default not in pool.names:
            raise ValueError(f"the default model {default!r} is not among those served")
        self.pool = pool
        self.default = default
        self._cards = cards or {}
        self._aliases = aliases or {}

    def served_name(self, name: str) -> str:
        """The served model a name means (itself unless it is an alias; a batch's lines may
        use the aliases too); the pool refuses a name it does not serve."""
        return self._aliases.get(name, name)

    async def open(self, body: dict) -> Target:
        name = self.served_name(model_of(body) or self.default)
        try:
            lease = self.pool.acquire(name, keep_alive_of(body))
        except UnknownModel as exc:
            raise ApiError(404, str(exc), param="model", code="model_not_found") from None
        except ModelTooLarge as exc:
            raise ApiError(400, str(exc), param="model", code="model_too_large") from None
        except PoolError as exc:
            raise ApiError(503, str(exc)) from None
        try:
            # A call cancelled while it waits (the server stopping) cannot cancel the load
            # for the others: the pool's future is marked running (model_pool._outcome).
            engine = await asyncio.wrap_future(lease.ready)
        except PoolError as exc:
            lease.release()
            raise ApiError(503, str(exc)) from None
        except BaseException:
            lease.release()
            raise
        return Target(name, engine, lease.release)

    def listing(self) -> list[dict[str, Any]]:
        """Every model served, loaded or not: OpenAI's fields, then its state ("loaded",
        "loading" with its load_progress from 0 to 1, "unloading", "not loaded"), context
        length, whether it sees images and has a tool format of its own, and the memory it
        counts against the budget."""
        models = []
        for status in self.pool.status():
            card = self._cards.get(status.name)
            model: dict[str, Any] = {"id": status.name, "object": "model", "created": 0, "owned_by": "chorus",
                                     "state": status.state.value}
            context = status.info.n_ctx if status.info is not None else card.context_length if card else 0
            if context > 0:
                model["context_length"] = context
            if card is not None:
                model["vision"], model["native_tools"] = card.vision, card.native_tools
            model["memory_bytes"] = status.memory_bytes
            if status.progress is not None:
                model["load_progress"] = round(status.progress, 3)
            if status.error is not None and status.state is ModelState.NOT_LOADED:
                model["load_error"] = status.error
            models.append(model)
        return models

    def lanes(self) -> list[Lane]:
        lanes: list[Lane] = []
        for name, engine in self.pool.loaded().items():
            try:
                snapshot = engine.metrics()
            except EngineError:  # unloading meanwhile
                continue
            if snapshot is not None:
                lanes.append((name, snapshot))
        return lanes
