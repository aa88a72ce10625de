"""POST /v1/embeddings: the served model's pooled embeddings, from a context of their own
(inference's EmbeddingWorker, on its own thread) so that chats are not disturbed. The worker
loads the engine's model file at the first request and stops with the server; concurrent
requests share its decodes. Under the server's limits: the body size, a concurrency slot.

The answer is OpenAI's: {"object": "list", "data": [{"object": "embedding", "index",
"embedding"}], "model", "usage": {"prompt_tokens", "total_tokens"}}, each embedding a list
of floats or, for encoding_format "base64", its little-endian float32 bytes in base64."""

from __future__ import annotations

import asyncio
import base64

import anyio
import numpy as np
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from app.server.calls import parsed
from app.server.embeddings_parsing import EmbeddingAsk, embedding_ask
from app.server.errors import ApiError
from app.server.state import ServerState
from inference import RequestError


async def create(state: ServerState, request: Request) -> Response:
    if state.stopping:
        raise ApiError(503, "the server is stopping")
    release = state.admit()
    try:
        ask = await parsed(state, request, embedding_ask)
        worker = await anyio.to_thread.run_sync(state.embeddings.worker, state.engine)
        _check_dimensions(ask, worker.dimensions)
        try:
            vectors, tokens = await asyncio.wrap_future(worker.embed(ask.inputs))
        except RequestError as exc:
            raise ApiError(400, str(exc), param="input") from None
    finally:
        release()
    data = [{"object": "embedding", "index": i, "embedding": _encoded(row, ask.base64)}
            for i, row in enumerate(vectors)]
    return JSONResponse({"object": "list", "data": data, "model": state.model_id,
                         "usage": {"prompt_tokens": tokens, "total_tokens": tokens}})


def _check_dimensions(ask: EmbeddingAsk, size: int) -> None:
    if ask.dimensions is not None and ask.dimensions != size:
        raise ApiError(400, f"dimensions: this model's embeddings have {size} dimensions and cannot be shortened "
                            f"to {ask.dimensions}; leave dimensions out or send {size}", param="dimensions")


def _encoded(row: np.ndarray, as_base64: bool) -> list[float] | str:
    if as_base64:
        return base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
    return [float(x) for x in row]
