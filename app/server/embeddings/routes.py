"""POST /v1/embeddings: the served model's pooled embeddings, computed by the engine
(EngineClient.embed: a context of their own on a thread of its own, in the engine's process,
so that chats are not disturbed and the window never loads the weights; loaded at the first
request, concurrent requests share its decodes). Under the server's limits: the body size, a
concurrency slot.

The answer is OpenAI's: {"object": "list", "data": [{"object": "embedding", "index",
"embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}, each embedding a list
of floats or, for encoding_format "base64", its little-endian float32 bytes in base64."""

from __future__ import annotations

import asyncio
import base64
from functools import partial

import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.server.calls.intake import admitted
from app.server.calls.state import ServerState
from app.server.embeddings.parsing import EmbeddingAsk, embedding_ask
from app.server.http.errors import ApiError
from app.server.http.routing import route
from inference import EngineClient, EngineError, ModelLoadError, RequestError


def routes(state: ServerState) -> list[Route]:
    """The family's routes on this server's state (api.py lists the families)."""
    return [
        route("/v1/embeddings", partial(create, state), "POST"),
    ]


async def create(state: ServerState, request: Request) -> Response:
    ask, target, release = await admitted(state, request, embedding_ask)
    try:
        vectors, tokens = await _embedded(target.engine, ask)
    finally:
        release()
    _check_dimensions(ask, vectors.shape[1])
    data = [{"object": "embedding", "index": i, "embedding": _encoded(row, ask.base64)}
            for i, row in enumerate(vectors)]
    return JSONResponse({"object": "list", "data": data, "model": target.model_id,
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


async def _embedded(engine: EngineClient, ask: EmbeddingAsk) -> tuple[np.ndarray, int]:
    if engine.info is None:
        raise ApiError(503, "the model is not loaded yet: no embeddings until it is")
    try:
        return await asyncio.wrap_future(engine.embed(ask.inputs))
    except RequestError as exc:
        raise ApiError(400, str(exc), param="input") from None
    except (ModelLoadError, EngineError) as exc:
        raise ApiError(503, f"no embeddings from this model: {exc}") from None


def _check_dimensions(ask: EmbeddingAsk, size: int) -> None:
    if ask.dimensions is not None and ask.dimensions != size:
        raise ApiError(400, f"dimensions: this model's embeddings have {size} dimensions and cannot be shortened "
                            f"to {ask.dimensions}; leave dimensions out or send {size}", param="dimensions")


def _encoded(row: np.ndarray, as_base64: bool) -> list[float] | str:
    if as_base64:
        return base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
    return [float(x) for x in row]
