"""An embeddings batch request as a job's item: its body parsed by the live route's parser
(embeddings_parsing.py) and answered as that route answers, from the engine's embedding
context (EngineClient.embed: a context of its own, so the chats' batch is not touched).
It has no stream to share the engine's steps: the item's result is ready when start returns."""

from __future__ import annotations

import base64
import json
import time

from app.jobs import ItemRun
from app.server.batches.work import refused
from app.server.embeddings.parsing import embedding_ask
from app.server.http.errors import ApiError
from inference import EngineClient, EngineError, ModelLoadError, RequestError
from storage import ItemRecord, ItemResult


class EmbeddingWork:
    def __init__(self, engine: EngineClient, model_id: str) -> None:
        self.engine, self.model_id = engine, model_id

    def start(self, item: ItemRecord, request_id: str) -> ItemRun | ItemResult:
        """EngineError (the engine is down or still loading) passes: the runner pauses."""
        started = time.monotonic()
        try:
            body, tokens = self._answer(item.fields)
        except ApiError as exc:
            return refused(exc, request_id, seconds=time.monotonic() - started)
        response = {"status_code": 200, "request_id": request_id, "body": body}
        return ItemResult(answer=json.dumps(response), finish_reason="stop", prompt_tokens=tokens,
                          seconds=time.monotonic() - started)

    def _answer(self, fields: dict) -> tuple[dict, int]:
        ask = embedding_ask(fields, None)
        if self.engine.info is None:
            raise EngineError("the model is not loaded yet")
        try:
            vectors, tokens = self.engine.embed(ask.inputs).result()
        except RequestError as exc:
            raise ApiError(400, str(exc), param="input") from None
        except ModelLoadError as exc:
            raise ApiError(503, f"no embeddings from this model: {exc}") from None
        size = vectors.shape[1]
        if ask.dimensions is not None and ask.dimensions != size:  # as the live route refuses it
            raise ApiError(400, f"dimensions: this model's embeddings have {size} dimensions and cannot be "
                                f"shortened to {ask.dimensions}", param="dimensions")
        data = [{"object": "embedding", "index": i,
                 "embedding": (base64.b64encode(row.astype("<f4").tobytes()).decode("ascii") if ask.base64
                               else [float(x) for x in row])}
                for i, row in enumerate(vectors)]
        return ({"object": "list", "data": data, "model": self.model_id,
                 "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}, tokens)
