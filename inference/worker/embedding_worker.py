"""The thread that owns a pooled embedding context (embedder.py): one llama context, one
owning thread, as with the engine's. Calls come in from any thread as futures; the thread
takes every call waiting when it wakes, so concurrent requests share its decodes.

    worker = EmbeddingWorker.start(path)           # loads on its thread; ModelLoadError
    vectors, tokens = worker.embed(["a", [1, 2, 3]]).result()  # (n, dimensions) float32, tokens read
    worker.close()

An input that cannot be embedded (empty, too long, a token outside the vocabulary) fails
its own call with a RequestError naming it; the calls beside it are answered."""

from __future__ import annotations

import logging
import queue
import threading
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from inference.errors import ModelLoadError, RequestError
from inference.worker.embedder import LlamaEmbedder

log = logging.getLogger(__name__)

Input = str | list[int]


@dataclass
class _Call:
    inputs: list[Input]
    future: Future = field(default_factory=Future)
    tokens: list[list[int]] = field(default_factory=list)


class EmbeddingWorker:
    def __init__(self, path: Path, **embedder_settings: int) -> None:
        self.path = Path(path)
        self._settings = embedder_settings
        self._calls: queue.SimpleQueue[_Call | None] = queue.SimpleQueue()
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.dimensions = 0
        self.n_ctx = 0
        self._thread = threading.Thread(target=self._run, name="chorus-embeddings", daemon=True)

    @classmethod
    def start(cls, path: Path, **embedder_settings: int) -> EmbeddingWorker:
        worker = cls(path, **embedder_settings)
        worker._thread.start()
        worker._ready.wait()
        if worker._error is not None:
            worker._thread.join()
            raise worker._error
        return worker

    def embed(self, inputs: list[Input]) -> Future:
        """A future of (the inputs' unit-length vectors, one row each in order, how many
        tokens they were)."""
        call = _Call(list(inputs))
        if not self._thread.is_alive():
            call.future.set_exception(RequestError("the embedding worker has stopped"))
        else:
            self._calls.put(call)
        return call.future

    def close(self) -> None:
        if self._thread.is_alive():
            self._calls.put(None)
            self._thread.join()

    # ----- the owning thread ------------------------------------------------------

    def _run(self) -> None:
        try:
            embedder = LlamaEmbedder(self.path, **self._settings)
        except (ModelLoadError, OSError) as exc:
            self._error = exc
            self._ready.set()
            return
        self.dimensions, self.n_ctx = embedder.dimensions, embedder.n_ctx
        self._ready.set()
        try:
            while (calls := self._waiting()) is not None:
                self._answer(embedder, calls)
        finally:
            embedder.close()
            self._fail_left()

    def _waiting(self) -> list[_Call] | None:
        """The next call and every other one already waiting; None once closed."""
        first = self._calls.get()
        if first is None:
            return None
        calls = [first]
        while True:
            try:
                more = self._calls.get_nowait()
            except queue.Empty:
                return calls
            if more is None:
                self._calls.put(None)  # close after answering these
                return calls
            calls.append(more)

    def _answer(self, embedder: LlamaEmbedder, calls: list[_Call]) -> None:
        ready = [call for call in calls if self._tokenized(embedder, call)]
        if not ready:
            return
        inputs = [tokens for call in ready for tokens in call.tokens]
        try:
            vectors = embedder.embed(inputs)
        except RequestError as exc:
            for call in ready:
                call.future.set_exception(exc)
            return
        start = 0
        for call in ready:
            rows = np.array(vectors[start:start + len(call.tokens)])
            call.future.set_result((rows, sum(len(tokens) for tokens in call.tokens)))
            start += len(call.tokens)

    @staticmethod
    def _tokenized(embedder: LlamaEmbedder, call: _Call) -> bool:
        """Tokenizes and checks a call's inputs; a bad one fails the call alone."""
        try:
            for i, item in enumerate(call.inputs):
                tokens = embedder.tokenize(item) if isinstance(item, str) else list(item)
                embedder.check(tokens, f"input[{i}]")
                call.tokens.append(tokens)
        except RequestError as exc:
            call.future.set_exception(exc)
            return False
        return True

    def _fail_left(self) -> None:
        while True:
            try:
                call = self._calls.get_nowait()
            except queue.Empty:
                return
            if call is not None:
                call.future.set_exception(RequestError("the embedding worker has stopped"))
