"""One server's embedding worker (inference's EmbeddingWorker: a pooled embedding context
on its own thread, apart from the engine's), started on the engine's model file at the
first /v1/embeddings request and closed when the server stops."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from app.engines.protocol import ServedEngine
from app.server.errors import ApiError

if TYPE_CHECKING:
    from inference import EmbeddingWorker


class Embeddings:
    """worker() blocks while it loads (seconds for a big model): called in a worker thread."""

    def __init__(self) -> None:
        self._worker: EmbeddingWorker | None = None
        self._lock = threading.Lock()

    def worker(self, engine: ServedEngine) -> EmbeddingWorker:
        with self._lock:
            if self._worker is None:
                info = engine.info
                if info is None:
                    raise ApiError(503, "the model is not loaded yet: no embeddings until it is")
                # Imported here: the app's process serves without loading llama.cpp until asked.
                from inference import EmbeddingWorker, ModelLoadError

                try:
                    self._worker = EmbeddingWorker.start(info.path, n_gpu_layers=info.n_gpu_layers)
                except ModelLoadError as exc:
                    raise ApiError(503, f"no embeddings from this model: {exc}") from None
            return self._worker

    def close(self) -> None:
        with self._lock:
            if self._worker is not None:
                self._worker.close()
                self._worker = None
